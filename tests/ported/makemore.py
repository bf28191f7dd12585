"""Port of karpathy/makemore makemore.py: character-level name models (here the MLP and the
RNN/GRU cell models, chosen by --type) with a CharDataset, a train/test split by randperm, an
InfiniteDataLoader over a RandomSampler with replacement, AdamW, periodic evaluation through a
shuffled DataLoader under @torch.inference_mode, a best-model checkpoint and sampling with top-k
and multinomial. The names are a few written here; the TensorBoard writer is left out."""
import argparse
import os

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

NAMES = ("emma olivia ava isabella sophia charlotte mia amelia harper evelyn abigail emily "
         "elizabeth mila ella avery sofia camila aria scarlett victoria madison luna grace chloe "
         "penelope layla riley zoey nora lily eleanor hannah lillian addison aubrey ellie stella")


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.block_size, self.vocab_size = config.block_size, config.vocab_size
        self.wte = nn.Embedding(config.vocab_size + 1, config.n_embd)  # +1: the padding token
        self.mlp = nn.Sequential(
            nn.Linear(self.block_size * config.n_embd, config.n_embd2), nn.Tanh(),
            nn.Linear(config.n_embd2, self.vocab_size))

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        embs = []
        for k in range(self.block_size):
            embs.append(self.wte(idx))
            idx = torch.roll(idx, 1, 1)
            idx[:, 0] = self.vocab_size
        logits = self.mlp(torch.cat(embs, -1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


class RNNCell(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        return F.tanh(self.xh_to_h(torch.cat([xt, hprev], dim=1)))


class GRUCell(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))
        hbar = F.tanh(self.xh_to_hbar(torch.cat([xt, r * hprev], dim=1)))
        z = F.sigmoid(self.xh_to_z(xh))
        return (1 - z) * hprev + z * hbar


class RNN(nn.Module):
    def __init__(self, config, cell_type):
        super().__init__()
        self.block_size, self.vocab_size = config.block_size, config.vocab_size
        self.start = nn.Parameter(torch.zeros(1, config.n_embd2))
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.cell = RNNCell(config) if cell_type == 'rnn' else GRUCell(config)
        self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        b, t = idx.size()
        emb = self.wte(idx)
        hprev = self.start.expand((b, -1))
        hiddens = []
        for i in range(t):
            hprev = self.cell(emb[:, i, :], hprev)
            hiddens.append(hprev)
        logits = self.lm_head(torch.stack(hiddens, 1))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                   ignore_index=-1)
        return logits, loss


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
    block_size = model.get_block_size()
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits, _ = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float('Inf')
        probs = F.softmax(logits, dim=-1)
        if do_sample:
            idx_next = torch.multinomial(probs, num_samples=1)
        else:
            _, idx_next = torch.topk(probs, k=1, dim=-1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


class CharDataset(Dataset):
    def __init__(self, words, chars, max_word_length):
        self.words, self.chars, self.max_word_length = words, chars, max_word_length
        self.stoi = {ch: i + 1 for i, ch in enumerate(chars)}
        self.itos = {i: s for s, i in self.stoi.items()}

    def __len__(self):
        return len(self.words)

    def get_vocab_size(self):
        return len(self.chars) + 1

    def get_output_length(self):
        return self.max_word_length + 1

    def encode(self, word):
        return torch.tensor([self.stoi[w] for w in word], dtype=torch.long)

    def decode(self, ix):
        return ''.join(self.itos[i] for i in ix)

    def __getitem__(self, idx):
        word = self.words[idx]
        ix = self.encode(word)
        x = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        y = torch.zeros(self.max_word_length + 1, dtype=torch.long)
        x[1:1 + len(ix)] = ix
        y[:len(ix)] = ix
        y[len(ix) + 1:] = -1  # no loss at the inactive locations
        return x, y


def create_datasets(words):
    chars = sorted(list(set(''.join(words))))
    max_word_length = max(len(w) for w in words)
    test_set_size = min(8, int(len(words) * 0.1))
    rp = torch.randperm(len(words)).tolist()
    train_words = [words[i] for i in rp[:-test_set_size]]
    test_words = [words[i] for i in rp[-test_set_size:]]
    print(f"split up the dataset into {len(train_words)} training examples and "
          f"{len(test_words)} test examples")
    return (CharDataset(train_words, chars, max_word_length),
            CharDataset(test_words, chars, max_word_length))


class InfiniteDataLoader:
    def __init__(self, dataset, **kwargs):
        train_sampler = torch.utils.data.RandomSampler(dataset, replacement=True,
                                                       num_samples=int(1e10))
        self.train_loader = DataLoader(dataset, sampler=train_sampler, **kwargs)
        self.data_iter = iter(self.train_loader)

    def next(self):
        try:
            batch = next(self.data_iter)
        except StopIteration:
            self.data_iter = iter(self.train_loader)
            batch = next(self.data_iter)
        return batch


@torch.inference_mode()
def evaluate(model, dataset, batch_size=50, max_batches=None):
    model.eval()
    loader = DataLoader(dataset, shuffle=True, batch_size=batch_size, num_workers=0)
    losses = []
    for i, batch in enumerate(loader):
        X, Y = batch
        logits, loss = model(X, Y)
        losses.append(loss.item())
        if max_batches is not None and i >= max_batches:
            break
    mean_loss = torch.tensor(losses).mean().item()
    model.train()
    return mean_loss


class ModelConfig:
    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


if __name__ == '__main__':
    parser = argparse.ArgumentParser(description="Make More")
    parser.add_argument('--work-dir', '-o', type=str, default='out')
    parser.add_argument('--seed', type=int, default=3407)
    parser.add_argument('--type', type=str, default='mlp')
    parser.add_argument('--n-embd', type=int, default=16)
    parser.add_argument('--n-embd2', type=int, default=16)
    parser.add_argument('--batch-size', '-b', type=int, default=8)
    parser.add_argument('--learning-rate', '-l', type=float, default=5e-3)
    parser.add_argument('--weight-decay', '-w', type=float, default=0.01)
    parser.add_argument('--max-steps', type=int, default=12)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.cuda.manual_seed_all(args.seed)
    os.makedirs(args.work_dir, exist_ok=True)
    train_dataset, test_dataset = create_datasets(NAMES.split())
    vocab_size = train_dataset.get_vocab_size()
    block_size = train_dataset.get_output_length()
    config = ModelConfig(vocab_size=vocab_size, block_size=block_size, n_embd=args.n_embd,
                         n_embd2=args.n_embd2)
    if args.type == 'mlp':
        model = MLP(config)
    elif args.type in ('rnn', 'gru'):
        model = RNN(config, cell_type=args.type)
    else:
        raise ValueError(f'model type {args.type} is not recognized')
    print(f"model #params: {sum(p.numel() for p in model.parameters())}")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate,
                                  weight_decay=args.weight_decay, betas=(0.9, 0.99), eps=1e-8)
    batch_loader = InfiniteDataLoader(train_dataset, batch_size=args.batch_size, pin_memory=True,
                                      num_workers=0)
    best_loss = None
    for step in range(args.max_steps):
        X, Y = batch_loader.next()
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 4 == 0:
            print(f"step {step} | loss {loss.item():.4f}")
        if step > 0 and step % 6 == 0:
            train_loss = evaluate(model, train_dataset, batch_size=16, max_batches=2)
            test_loss = evaluate(model, test_dataset, batch_size=16, max_batches=2)
            print(f"step {step} train loss: {train_loss} test loss: {test_loss}")
            if best_loss is None or test_loss < best_loss:
                torch.save(model.state_dict(), os.path.join(args.work_dir, "model.pt"))
                best_loss = test_loss
    X_init = torch.zeros(4, 1, dtype=torch.long)
    X_samp = generate(model, X_init, train_dataset.get_output_length() - 1, top_k=None,
                      do_sample=True).to('cpu')
    for i in range(X_samp.size(0)):
        row = X_samp[i, 1:].tolist()
        row = row[:row.index(0)] if 0 in row else row
        print('sample:', train_dataset.decode(row))
