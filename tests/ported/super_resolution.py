"""Port of pytorch/examples super_resolution (main.py, model.py, data.py): the efficient
sub-pixel network (convolutions, PixelShuffle, orthogonal init with calculate_gain) trained with
MSELoss and Adam, PSNR on a test set, a checkpoint per epoch. BSDS300 is replaced by local images
whose low-resolution inputs are 3x3 block averages of the targets; the checkpoint holds the state
dict (the original pickles the whole module, which onemodel's file format excludes)."""
import argparse
from math import log10

import localdata
import numpy as np
import torch
import torch.nn as nn
import torch.nn.init as init
import torch.optim as optim
import torch.utils.data as data
from torch.utils.data import DataLoader


class Net(nn.Module):
    def __init__(self, upscale_factor):
        super(Net, self).__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 64, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(64, 64, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(64, 32, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(32, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)
        init.orthogonal_(self.conv1.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv2.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv3.weight, init.calculate_gain('relu'))
        init.orthogonal_(self.conv4.weight)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


class LowHighPairs(data.Dataset):
    """(low-resolution input, high-resolution target) luminance pairs."""

    def __init__(self, count, size, factor, seed):
        self.targets = (localdata.images(count, 1, size, seed) + 1) / 2
        small = self.targets.reshape(count, 1, size // factor, factor, size // factor, factor)
        self.inputs = small.mean(axis=(3, 5)).astype(np.float32)

    def __getitem__(self, index):
        return torch.from_numpy(self.inputs[index]), torch.from_numpy(self.targets[index])

    def __len__(self):
        return len(self.targets)


parser = argparse.ArgumentParser(description='super resolution')
parser.add_argument('--upscale_factor', type=int, default=3)
parser.add_argument('--batchSize', type=int, default=8)
parser.add_argument('--testBatchSize', type=int, default=4)
parser.add_argument('--nEpochs', type=int, default=3)
parser.add_argument('--lr', type=float, default=0.01)
parser.add_argument('--seed', type=int, default=123)
opt = parser.parse_args()
print(opt)
torch.manual_seed(opt.seed)
device = torch.device("cpu")

print('===> Loading datasets')
train_set = LowHighPairs(8, 24, opt.upscale_factor, seed=1)
test_set = LowHighPairs(4, 24, opt.upscale_factor, seed=2)
training_data_loader = DataLoader(dataset=train_set, num_workers=0, batch_size=opt.batchSize,
                                  shuffle=True)
testing_data_loader = DataLoader(dataset=test_set, num_workers=0, batch_size=opt.testBatchSize,
                                 shuffle=False)

print('===> Building model')
model = Net(upscale_factor=opt.upscale_factor).to(device)
criterion = nn.MSELoss()
optimizer = optim.Adam(model.parameters(), lr=opt.lr)


def train(epoch):
    epoch_loss = 0
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0].to(device), batch[1].to(device)
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        epoch_loss += loss.item()
        loss.backward()
        optimizer.step()
        print("===> Epoch[{}]({}/{}): Loss: {:.6f}".format(
            epoch, iteration, len(training_data_loader), loss.item()))
    print("===> Epoch {} Complete: Avg. Loss: {:.6f}".format(
        epoch, epoch_loss / len(training_data_loader)))


def test():
    avg_psnr = 0
    with torch.no_grad():
        for batch in testing_data_loader:
            input, target = batch[0].to(device), batch[1].to(device)
            mse = criterion(model(input), target)
            avg_psnr += 10 * log10(1 / mse.item())
    print("===> Avg. PSNR (from the test loss): {:.5f} dB".format(
        avg_psnr / len(testing_data_loader)))


def checkpoint(epoch):
    model_out_path = "model_epoch_{}.pth".format(epoch)
    torch.save(model.state_dict(), model_out_path)
    print("Checkpoint saved to {}".format(model_out_path))


for epoch in range(1, opt.nEpochs + 1):
    train(epoch)
    test()
    checkpoint(epoch)
