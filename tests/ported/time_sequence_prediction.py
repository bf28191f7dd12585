"""Port of pytorch/examples time_sequence_prediction (generate_sine_wave.py, train.py): two
LSTMCells unrolled over sine waves, trained by LBFGS with step(closure), then asked to continue
the waves. The original works in float64 (.double()); this port stays in float32, the only dtype
onemodel trains in."""
import argparse

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

HIDDEN = 16


def sine_waves(count=8, length=40, period=20):
    shift = np.random.randint(-4 * period, 4 * period, count).reshape(count, 1)
    x = np.arange(length).reshape(1, length) + shift
    return np.sin(x / 1.0 / period).astype('float32')


class Sequence(nn.Module):
    def __init__(self):
        super(Sequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, HIDDEN)
        self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
        self.linear = nn.Linear(HIDDEN, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
        c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
        h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
        c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):  # feed the prediction back in
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


if __name__ == '__main__':
    parser = argparse.ArgumentParser()
    parser.add_argument('--steps', type=int, default=2)
    opt = parser.parse_args()
    np.random.seed(0)
    torch.manual_seed(0)
    data = sine_waves()
    input = torch.from_numpy(data[3:, :-1])
    target = torch.from_numpy(data[3:, 1:])
    test_input = torch.from_numpy(data[:3, :-1])
    test_target = torch.from_numpy(data[:3, 1:])
    seq = Sequence()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8, max_iter=6)
    for i in range(opt.steps):
        print('STEP: ', i)

        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            print('loss:', loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
        np.save('predict%d.npy' % i, y)
