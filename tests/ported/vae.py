"""Port of pytorch/examples vae/main.py: a variational autoencoder on 28x28 digits with the
reparameterisation trick (randn_like), a summed binary cross-entropy plus KL loss, Adam, a test
pass under no_grad and samples decoded from randn. MNIST is replaced by localdata.digits."""
import argparse

import localdata
import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

parser = argparse.ArgumentParser(description='VAE')
parser.add_argument('--batch-size', type=int, default=32)
parser.add_argument('--epochs', type=int, default=3)
parser.add_argument('--seed', type=int, default=1)
parser.add_argument('--log-interval', type=int, default=1)
args = parser.parse_args()
torch.manual_seed(args.seed)
device = torch.device("cpu")


class Digits(torch.utils.data.Dataset):
    def __init__(self, count, start):
        self.images, self.labels = localdata.digits(count, start=start)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return torch.from_numpy(self.images[i]).unsqueeze(0), int(self.labels[i])


train_loader = torch.utils.data.DataLoader(Digits(32, 0), batch_size=args.batch_size,
                                           shuffle=True)
test_loader = torch.utils.data.DataLoader(Digits(16, 500), batch_size=8, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc21 = nn.Linear(64, 8)
        self.fc22 = nn.Linear(64, 8)
        self.fc3 = nn.Linear(8, 64)
        self.fc4 = nn.Linear(64, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        return torch.sigmoid(self.fc4(F.relu(self.fc3(z))))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{}]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset), loss.item() / len(data)))
    print('====> Epoch: {} Average loss: {:.6f}'.format(
        epoch, train_loss / len(train_loader.dataset)))


def test(epoch):
    model.eval()
    test_loss = 0
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            if i == 0:
                n = min(data.size(0), 8)
                comparison = torch.cat([data[:n], recon_batch.view(8, 1, 28, 28)[:n]])
                assert comparison.shape == (2 * n, 1, 28, 28)
    test_loss /= len(test_loader.dataset)
    print('====> Test set loss: {:.6f}'.format(test_loss))


for epoch in range(1, args.epochs + 1):
    train(epoch)
    test(epoch)
    with torch.no_grad():
        sample = model.decode(torch.randn(16, 8).to(device)).cpu()
        print('sample mean', sample.view(16, 1, 28, 28).mean().item())
