"""Port of pytorch/tutorials intermediate_source/char_rnn_generation_tutorial.py: a recurrent
network of Linear layers conditioned on a one-hot category, with dropout and LogSoftmax, trained
letter by letter on random (category, name) pairs with losses summed by hand and parameters
stepped by p.data.add_(p.grad.data, alpha=-lr), then sampled greedily with topk."""
import random
import string

import torch
import torch.nn as nn

all_letters = string.ascii_letters + " .,;'-"
n_letters = len(all_letters) + 1  # plus the end-of-name marker
category_lines = {
    'English': ['Smith', 'Taylor', 'Brown', 'Wilson', 'Walker', 'Wright'],
    'Russian': ['Ivanov', 'Petrov', 'Sidorov', 'Smirnov', 'Volkov', 'Popov'],
    'Spanish': ['Garcia', 'Lopez', 'Martinez', 'Sanchez', 'Perez', 'Gomez'],
}
all_categories = list(category_lines)
n_categories = len(all_categories)


class RNN(nn.Module):
    def __init__(self, input_size, hidden_size, output_size):
        super(RNN, self).__init__()
        self.hidden_size = hidden_size
        self.i2h = nn.Linear(n_categories + input_size + hidden_size, hidden_size)
        self.i2o = nn.Linear(n_categories + input_size + hidden_size, output_size)
        self.o2o = nn.Linear(hidden_size + output_size, output_size)
        self.dropout = nn.Dropout(0.1)
        self.softmax = nn.LogSoftmax(dim=1)

    def forward(self, category, input, hidden):
        input_combined = torch.cat((category, input, hidden), 1)
        hidden = self.i2h(input_combined)
        output = self.i2o(input_combined)
        output = self.o2o(torch.cat((hidden, output), 1))
        output = self.softmax(self.dropout(output))
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, self.hidden_size)


def randomTrainingPair():
    category = random.choice(all_categories)
    return category, random.choice(category_lines[category])


def categoryTensor(category):
    tensor = torch.zeros(1, n_categories)
    tensor[0][all_categories.index(category)] = 1
    return tensor


def inputTensor(line):
    tensor = torch.zeros(len(line), 1, n_letters)
    for li in range(len(line)):
        tensor[li][0][all_letters.find(line[li])] = 1
    return tensor


def targetTensor(line):
    letter_indexes = [all_letters.find(line[li]) for li in range(1, len(line))]
    letter_indexes.append(n_letters - 1)
    return torch.LongTensor(letter_indexes)


criterion = nn.NLLLoss()
learning_rate = 0.0005
rnn = RNN(n_letters, 32, n_letters)


def train(category_tensor, input_line_tensor, target_line_tensor):
    target_line_tensor.unsqueeze_(-1)
    hidden = rnn.initHidden()
    rnn.zero_grad()
    loss = torch.Tensor([0])
    for i in range(input_line_tensor.size(0)):
        output, hidden = rnn(category_tensor, input_line_tensor[i], hidden)
        loss += criterion(output, target_line_tensor[i])
    loss.backward()
    for p in rnn.parameters():
        p.data.add_(p.grad.data, alpha=-learning_rate)
    return output, loss.item() / input_line_tensor.size(0)


total_loss = 0
for iter in range(1, 61):
    category, line = randomTrainingPair()
    output, loss = train(categoryTensor(category), inputTensor(line), targetTensor(line))
    total_loss += loss
    if iter % 20 == 0:
        print('iteration %d average loss %.6f' % (iter, total_loss / 20))
        total_loss = 0


def sample(category, start_letter='A', max_length=10):
    with torch.no_grad():
        category_tensor = categoryTensor(category)
        input = inputTensor(start_letter)
        hidden = rnn.initHidden()
        output_name = start_letter
        for i in range(max_length):
            output, hidden = rnn(category_tensor, input[0], hidden)
            topv, topi = output.topk(1)
            topi = topi[0][0]
            if topi == n_letters - 1:
                break
            output_name += all_letters[topi]
            input = inputTensor(all_letters[topi])
        return output_name


for category in all_categories:
    print(category, sample(category, 'S'))
