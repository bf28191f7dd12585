"""Port of pytorch/tutorials intermediate_source/spatial_transformer_tutorial.py: a digit
classifier behind a spatial transformer (a localisation network regressing a 2x3 affine matrix,
initialised to the identity with weight.data.zero_() and bias.data.copy_, then F.affine_grid and
F.grid_sample), with Dropout2d and F.dropout, trained by SGD; test loss and accuracy. MNIST is
replaced by localdata.digits."""
import localdata
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

device = torch.device("cpu")


class Digits(torch.utils.data.Dataset):
    def __init__(self, count, start):
        self.images, self.labels = localdata.digits(count, start=start)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return (torch.from_numpy(self.images[i]).unsqueeze(0) - 0.1307) / 0.3081, \
            int(self.labels[i])


train_loader = torch.utils.data.DataLoader(Digits(64, 0), batch_size=32, shuffle=True,
                                           num_workers=0)
test_loader = torch.utils.data.DataLoader(Digits(32, 700), batch_size=32, shuffle=True,
                                          num_workers=0)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5),
            nn.MaxPool2d(2, stride=2),
            nn.ReLU(True))
        self.fc_loc = nn.Sequential(
            nn.Linear(10 * 3 * 3, 32),
            nn.ReLU(True),
            nn.Linear(32, 3 * 2))
        self.fc_loc[2].weight.data.zero_()
        self.fc_loc[2].bias.data.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))

    def stn(self, x):
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size())
        return F.grid_sample(x, grid)

    def forward(self, x):
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


model = Net().to(device)
optimizer = optim.SGD(model.parameters(), lr=0.01)


def train(epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        print('Train Epoch: {} [{}/{}]\tLoss: {:.6f}'.format(
            epoch, batch_idx * len(data), len(train_loader.dataset), loss.item()))


def test():
    with torch.no_grad():
        model.eval()
        test_loss, correct = 0, 0
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, size_average=False).item()
            pred = output.max(1, keepdim=True)[1]
            correct += pred.eq(target.view_as(pred)).sum().item()
        test_loss /= len(test_loader.dataset)
        print('Test set: Average loss: {:.4f}, Accuracy: {}/{}'.format(
            test_loss, correct, len(test_loader.dataset)))


for epoch in range(1, 3):
    train(epoch)
    test()
with torch.no_grad():
    data = next(iter(test_loader))[0].to(device)
    print('transformed batch', tuple(model.stn(data).cpu().shape))
