"""Port of pytorch/examples regression/main.py: fit a degree-4 polynomial with one Linear layer,
smooth L1 loss and hand-written gradient steps on p.data. Stops after a few batches here."""
from itertools import count

import torch
import torch.nn.functional as F

DEGREE = 4
MAX_BATCHES = 6
true_w = torch.randn(DEGREE, 1) * 5
true_b = torch.randn(1) * 5


def powers(x):
    """Columns x, x^2, ..., x^DEGREE of a batch of scalars."""
    x = x.unsqueeze(1)
    return torch.cat([x ** k for k in range(1, DEGREE + 1)], 1)


def target(features):
    return features.mm(true_w) + true_b.item()


def describe(weights, bias):
    terms = ''.join('{:+.2f} x^{} '.format(w, k + 1) for k, w in enumerate(weights))
    return 'y = ' + terms + '{:+.2f}'.format(bias[0])


def batch(size=32):
    features = powers(torch.randn(size))
    return features, target(features)


layer = torch.nn.Linear(true_w.size(0), 1)

for n in count(1):
    xs, ys = batch()
    layer.zero_grad()
    objective = F.smooth_l1_loss(layer(xs), ys)
    value = objective.item()
    objective.backward()
    for p in layer.parameters():
        p.data.add_(-0.1 * p.grad)
    print('batch {} loss {:.6f}'.format(n, value))
    if value < 1e-3 or n == MAX_BATCHES:
        break

print('Loss: {:.6f} after {} batches'.format(value, n))
print('learned: ' + describe(layer.weight.view(-1), layer.bias))
print('actual:  ' + describe(true_w.view(-1), true_b))
