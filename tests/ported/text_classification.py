"""Port of pytorch/tutorials beginner_source/text_sentiment_ngrams_tutorial.py: news headlines
classified by an EmbeddingBag (mean over a batch of concatenated token ids with offsets made by
cumsum in a collate_fn) and a Linear layer, uniform_ init on .data, SGD at lr 5 with
clip_grad_norm_ and StepLR(optimizer, 1.0, gamma=0.1) stepped per epoch when validation accuracy
stops improving. AG_NEWS and torchtext's tokenizer and vocabulary are replaced by headlines and a
split-on-spaces vocabulary written here."""
import torch
from torch import nn
from torch.utils.data import DataLoader

HEADLINES = [
    (1, "leaders meet to discuss the election and the new government"),
    (2, "the team wins the final match of the season at home"),
    (3, "shares rise as the bank reports strong profits"),
    (4, "new phone chip makes computers faster and cheaper"),
    (1, "parliament votes on the new law after long debate"),
    (2, "star player scores twice as the club wins the cup"),
    (3, "oil prices fall and markets close lower"),
    (4, "scientists release software that learns from data"),
    (1, "the minister resigns after the vote"),
    (2, "coach praises the team after the match"),
    (3, "the bank raises rates as prices rise"),
    (4, "the new software update makes phones faster"),
]
device = torch.device("cpu")
vocab = {"<unk>": 0}
for _, text in HEADLINES:
    for token in text.split():
        vocab.setdefault(token, len(vocab))


def text_pipeline(x):
    return [vocab.get(token, 0) for token in x.split()]


def label_pipeline(x):
    return int(x) - 1


def collate_batch(batch):
    label_list, text_list, offsets = [], [], [0]
    for _label, _text in batch:
        label_list.append(label_pipeline(_label))
        processed_text = torch.tensor(text_pipeline(_text), dtype=torch.int64)
        text_list.append(processed_text)
        offsets.append(processed_text.size(0))
    label_list = torch.tensor(label_list, dtype=torch.int64)
    offsets = torch.tensor(offsets[:-1]).cumsum(dim=0)
    text_list = torch.cat(text_list)
    return label_list.to(device), text_list.to(device), offsets.to(device)


class TextClassificationModel(nn.Module):
    def __init__(self, vocab_size, embed_dim, num_class):
        super(TextClassificationModel, self).__init__()
        self.embedding = nn.EmbeddingBag(vocab_size, embed_dim, sparse=False)
        self.fc = nn.Linear(embed_dim, num_class)
        self.init_weights()

    def init_weights(self):
        initrange = 0.5
        self.embedding.weight.data.uniform_(-initrange, initrange)
        self.fc.weight.data.uniform_(-initrange, initrange)
        self.fc.bias.data.zero_()

    def forward(self, text, offsets):
        return self.fc(self.embedding(text, offsets))


num_class = len(set(label for (label, text) in HEADLINES))
model = TextClassificationModel(len(vocab), 16, num_class).to(device)


def train(dataloader):
    model.train()
    total_acc, total_count = 0, 0
    for idx, (label, text, offsets) in enumerate(dataloader):
        optimizer.zero_grad()
        predicted_label = model(text, offsets)
        loss = criterion(predicted_label, label)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        total_acc += (predicted_label.argmax(1) == label).sum().item()
        total_count += label.size(0)
        print('| epoch {:3d} | batch {:3d} | loss {:.7f} | accuracy {:8.3f}'.format(
            epoch, idx, loss.item(), total_acc / total_count))


def evaluate(dataloader):
    model.eval()
    total_acc, total_count, total_loss = 0, 0, 0.0
    with torch.no_grad():
        for idx, (label, text, offsets) in enumerate(dataloader):
            predicted_label = model(text, offsets)
            total_loss += criterion(predicted_label, label).item()
            total_acc += (predicted_label.argmax(1) == label).sum().item()
            total_count += label.size(0)
    return total_acc / total_count, total_loss / len(dataloader)


EPOCHS, LR, BATCH_SIZE = 4, 5, 8
criterion = torch.nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 1.0, gamma=0.1)
total_accu = None
train_dataset, valid_dataset = HEADLINES[:8], HEADLINES[8:]
train_dataloader = DataLoader(train_dataset, batch_size=BATCH_SIZE, shuffle=True,
                              collate_fn=collate_batch)
valid_dataloader = DataLoader(valid_dataset, batch_size=BATCH_SIZE, shuffle=True,
                              collate_fn=collate_batch)
for epoch in range(1, EPOCHS + 1):
    train(train_dataloader)
    accu_val, loss_val = evaluate(valid_dataloader)
    if total_accu is not None and total_accu > accu_val:
        scheduler.step()
    else:
        total_accu = accu_val
    print('| end of epoch {:3d} | valid accuracy {:8.3f} | valid loss {:.7f} | lr {}'.format(
        epoch, accu_val, loss_val, scheduler.get_last_lr()[0]))

label, text, offsets = collate_batch([(1, "the team wins the vote")])
with torch.no_grad():
    print("This is a %d news" % (model(text, offsets).argmax(1).item() + 1))
