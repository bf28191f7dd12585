"""Port of pytorch/tutorials recipes_source/recipes/saving_and_loading_a_general_checkpoint.py:
the CIFAR LeNet and SGD with momentum, a checkpoint dict of epoch, model and optimizer state dicts
and the last loss written with torch.save, read back with torch.load(weights_only=True) into a
fresh model and optimizer, and training resumed. Here both the original and the restored pair
train on, and their losses must agree."""
import localdata
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


inputs = torch.from_numpy(localdata.images(8, 3, 32, seed=11))
labels = torch.from_numpy(np.arange(8) % 10)
criterion = nn.CrossEntropyLoss()


def train(model, optimizer, steps, name):
    model.train()
    for step in range(steps):
        optimizer.zero_grad()
        loss = criterion(model(inputs), labels)
        loss.backward()
        optimizer.step()
        print(f'{name} step {step} loss {loss.item():.7f}')
    return loss.item()


net = Net()
optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
LOSS = train(net, optimizer, 3, 'before saving')

EPOCH = 5
PATH = "model.pt"
torch.save({
    'epoch': EPOCH,
    'model_state_dict': net.state_dict(),
    'optimizer_state_dict': optimizer.state_dict(),
    'loss': LOSS,
}, PATH)

model = Net()
optimizer2 = optim.SGD(model.parameters(), lr=0.001, momentum=0.9)
checkpoint = torch.load(PATH, weights_only=True)
model.load_state_dict(checkpoint['model_state_dict'])
optimizer2.load_state_dict(checkpoint['optimizer_state_dict'])
epoch = checkpoint['epoch']
loss = checkpoint['loss']
print('restored epoch', epoch, 'loss', loss)
model.eval()
with torch.no_grad():
    print('restored eval loss', criterion(model(inputs), labels).item())
model.train()

train(net, optimizer, 3, 'kept')
train(model, optimizer2, 3, 'restored')
