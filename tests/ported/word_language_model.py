"""Port of pytorch/examples word_language_model (main.py, model.py, data.py): an LSTM (or a
Transformer encoder, --model Transformer) language model over word tokens, trained by hand-written
SGD steps on p.data with gradient clipping and the learning rate quartered when validation stops
improving. The corpus is localdata.TEXT split three ways. The best model is kept as a state dict
(the original pickles the whole module, which onemodel's file format excludes)."""
import argparse
import math

import localdata
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.onnx

parser = argparse.ArgumentParser(description='word-level language model')
parser.add_argument('--model', type=str, default='LSTM')
parser.add_argument('--emsize', type=int, default=16)
parser.add_argument('--nhid', type=int, default=16)
parser.add_argument('--nlayers', type=int, default=2)
parser.add_argument('--lr', type=float, default=20)
parser.add_argument('--clip', type=float, default=0.25)
parser.add_argument('--epochs', type=int, default=2)
parser.add_argument('--batch_size', type=int, default=4)
parser.add_argument('--bptt', type=int, default=8)
parser.add_argument('--dropout', type=float, default=0.0)
parser.add_argument('--tied', action='store_true')
parser.add_argument('--seed', type=int, default=1111)
parser.add_argument('--log-interval', type=int, default=2)
parser.add_argument('--save', type=str, default='model.pt')
parser.add_argument('--onnx-export', type=str, default='')
parser.add_argument('--nhead', type=int, default=2)
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cpu")


class Vocabulary(object):
    def __init__(self):
        self.word2idx, self.idx2word = {}, []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, text):
        self.dictionary = Vocabulary()
        lines = text.splitlines()
        third = len(lines) // 3
        self.train = self.tokenize(lines[:third * 2])
        self.valid = self.tokenize(lines[third * 2:third * 2 + third // 2 + 1])
        self.test = self.tokenize(lines[third * 2 + third // 2 + 1:])

    def tokenize(self, lines):
        ids = []
        for line in lines:
            ids.append(torch.tensor([self.dictionary.add_word(w) for w in line.split() + ['<eos>']])
                       .type(torch.int64))
        return torch.cat(ids)


class RNNModel(nn.Module):
    def __init__(self, rnn_type, ntoken, ninp, nhid, nlayers, dropout=0.5, tie_weights=False):
        super(RNNModel, self).__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = getattr(nn, rnn_type)(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            self.decoder.weight = self.encoder.weight
        self.init_weights()
        self.rnn_type, self.nhid, self.nlayers = rnn_type, nhid, nlayers

    def init_weights(self):
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        if self.rnn_type == 'LSTM':
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))
        return weight.new_zeros(self.nlayers, bsz, self.nhid)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=64):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        pe = torch.zeros(max_len, d_model)
        position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer('pe', pe.unsqueeze(0).transpose(0, 1))

    def forward(self, x):
        return self.dropout(x + self.pe[:x.size(0), :])


class TransformerModel(nn.Transformer):
    def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.5):
        super(TransformerModel, self).__init__(d_model=ninp, nhead=nhead, dim_feedforward=nhid,
                                               num_encoder_layers=nlayers)
        self.src_mask = None
        self.pos_encoder = PositionalEncoding(ninp, dropout)
        self.input_emb = nn.Embedding(ntoken, ninp)
        self.ninp = ninp
        self.decoder = nn.Linear(ninp, ntoken)
        nn.init.uniform_(self.input_emb.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, src):
        if self.src_mask is None or self.src_mask.size(0) != len(src):
            self.src_mask = torch.log(torch.tril(torch.ones(len(src), len(src)))).to(src.device)
        src = self.pos_encoder(self.input_emb(src) * math.sqrt(self.ninp))
        return F.log_softmax(self.decoder(self.encoder(src, mask=self.src_mask)), dim=-1)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous().to(device)


corpus = Corpus(localdata.TEXT)
eval_batch_size = 2
train_data = batchify(corpus.train, args.batch_size)
val_data = batchify(corpus.valid, eval_batch_size)
test_data = batchify(corpus.test, eval_batch_size)
ntokens = len(corpus.dictionary)
if args.model == 'Transformer':
    model = TransformerModel(ntokens, args.emsize, args.nhead, args.nhid, args.nlayers,
                             args.dropout).to(device)
else:
    model = RNNModel(args.model, ntokens, args.emsize, args.nhid, args.nlayers, args.dropout,
                     args.tied).to(device)
criterion = nn.NLLLoss()


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i):
    seq_len = min(args.bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].view(-1)


def run_model(data, hidden):
    if args.model == 'Transformer':
        return model(data).view(-1, ntokens), hidden
    return model(data, repackage_hidden(hidden))


def evaluate(data_source):
    model.eval()
    total_loss = 0.
    hidden = None if args.model == 'Transformer' else model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i)
            output, hidden = run_model(data, hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)


def train():
    model.train()
    total_loss = 0.
    hidden = None if args.model == 'Transformer' else model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        output, hidden = run_model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        total_loss += loss.item()
        if batch % args.log_interval == 0 and batch > 0:
            cur_loss = total_loss / args.log_interval
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | loss {:.6f} | ppl {:.4f}'
                  .format(epoch, batch, len(train_data) // args.bptt, lr, cur_loss,
                          math.exp(cur_loss)))
            total_loss = 0


lr = args.lr
best_val_loss = None
for epoch in range(1, args.epochs + 1):
    train()
    val_loss = evaluate(val_data)
    print('| end of epoch {:3d} | valid loss {:.6f} | valid ppl {:.4f}'.format(
        epoch, val_loss, math.exp(val_loss)))
    if not best_val_loss or val_loss < best_val_loss:
        with open(args.save, 'wb') as f:
            torch.save(model.state_dict(), f)
        best_val_loss = val_loss
    else:
        lr /= 4.0

with open(args.save, 'rb') as f:
    model.load_state_dict(torch.load(f))
test_loss = evaluate(test_data)
print('| End of training | test loss {:.6f} | test ppl {:.4f}'.format(test_loss,
                                                                     math.exp(test_loss)))
if len(args.onnx_export) > 0:
    torch.onnx.export(model, (test_data[:args.bptt], model.init_hidden(eval_batch_size)),
                      args.onnx_export)
