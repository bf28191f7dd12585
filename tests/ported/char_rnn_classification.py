"""Port of pytorch/tutorials intermediate_source/char_rnn_classification_tutorial.py: names
classified by language with nn.RNN over one-hot letters (a Dataset of (label tensor, name tensor)
items), random_split with a seeded torch.Generator, minibatches of per-name losses accumulated
by hand, SGD with clip_grad_norm_, and an evaluation under no_grad. The names are a few written
here instead of the download."""
import random
import string

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import Dataset

allowed_characters = string.ascii_letters + " .,;'"
n_letters = len(allowed_characters)
NAMES = {
    'English': ['Smith', 'Taylor', 'Brown', 'Wilson', 'Walker', 'Wright', 'Hughes', 'Green'],
    'Italian': ['Rossi', 'Russo', 'Ferrari', 'Esposito', 'Bianchi', 'Romano', 'Colombo', 'Ricci'],
    'Japanese': ['Sato', 'Suzuki', 'Takahashi', 'Tanaka', 'Watanabe', 'Ito', 'Yamamoto', 'Kato'],
}


def letterToIndex(letter):
    return allowed_characters.find(letter)


def lineToTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li, letter in enumerate(line):
        tensor[li][0][letterToIndex(letter)] = 1
    return tensor


class NamesDataset(Dataset):
    def __init__(self):
        self.labels_uniq = list(NAMES)
        self.data, self.data_tensors, self.labels, self.labels_tensors = [], [], [], []
        for label, names in NAMES.items():
            for name in names:
                self.data.append(name)
                self.data_tensors.append(lineToTensor(name))
                self.labels.append(label)
        for label in self.labels:
            self.labels_tensors.append(torch.tensor([self.labels_uniq.index(label)],
                                                    dtype=torch.long))

    def __len__(self):
        return len(self.data)

    def __getitem__(self, idx):
        return self.labels_tensors[idx], self.data_tensors[idx], self.labels[idx], self.data[idx]


alldata = NamesDataset()
train_set, test_set = torch.utils.data.random_split(
    alldata, [.75, .25], generator=torch.Generator(device="cpu").manual_seed(2024))
print(f"train examples = {len(train_set)}, validation examples = {len(test_set)}")


class CharRNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(CharRNN, self).__init__()
        self.rnn = nn.RNN(input_size, hidden_size)
        self.h2o = nn.Linear(hidden_size, output_size)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, line_tensor):
        rnn_out, hidden = self.rnn(line_tensor)
        return self.softmax(self.h2o(hidden[0]))


rnn = CharRNN(n_letters, 16, len(alldata.labels_uniq))


def train(rnn, training_data, n_epoch=4, n_batch_size=6, report_every=1, learning_rate=0.2,
          criterion=nn.NLLLoss()):
    all_losses = []
    rnn.train()
    optimizer = torch.optim.SGD(rnn.parameters(), lr=learning_rate)
    for iter in range(1, n_epoch + 1):
        rnn.zero_grad()
        batches = list(range(len(training_data)))
        random.shuffle(batches)
        batches = np.array_split(batches, len(batches) // n_batch_size)
        current_loss = 0
        for idx, batch in enumerate(batches):
            batch_loss = 0
            for i in batch:
                (label_tensor, text_tensor, label, text) = training_data[i]
                output = rnn.forward(text_tensor)
                batch_loss += criterion(output, label_tensor)
            batch_loss.backward()
            nn.utils.clip_grad_norm_(rnn.parameters(), 3)
            optimizer.step()
            optimizer.zero_grad()
            current_loss += batch_loss.item() / len(batch)
        all_losses.append(current_loss / len(batches))
        if iter % report_every == 0:
            print(f"{iter} ({iter / n_epoch:.0%}): average batch loss = {all_losses[-1]}")
    return all_losses


all_losses = train(rnn, train_set)


def evaluate(rnn, testing_data, classes):
    confusion = torch.zeros(len(classes), len(classes))
    rnn.eval()
    with torch.no_grad():
        for i in range(len(testing_data)):
            (label_tensor, text_tensor, label, text) = testing_data[i]
            output = rnn(text_tensor)
            guess_i = output.topk(1)[1][0].item()
            confusion[classes.index(label)][guess_i] += 1
    for i in range(len(classes)):
        denom = confusion[i].sum()
        if denom > 0:
            confusion[i] = confusion[i] / denom
    return confusion


print('confusion diagonal', evaluate(rnn, test_set, classes=alldata.labels_uniq).diag().tolist())
