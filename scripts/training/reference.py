"""Reference vectors of a trained overlay, computed by the training code (PyTorch) from the
files the server ships: the base weights with the overlay's tensors (int8 rows × scales) laid
over them. The server's test `the_trained_model_matches_the_training_code` checks that the `e5`
crate gives the same vectors, so the served forward pass is the trained one.
"""

import argparse
import json
import struct

import numpy as np
import torch

from e5model import Encoder, Tokens, batch

TEXTS = [
    ("query", "algo tranquilo, de alguien que viaja solo y ayuda a la gente"),
    ("query", "a quiet story about someone who travels alone and helps people"),
    ("query", "colegialas en combates de carros blindados como deporte"),
    ("passage", "Mushishi. TV, 2005. A wandering master of strange primitive life forms travels "
                "from village to village, helping people afflicted by them."),
]


def read_overlay(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    base = 8 + n
    raw = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        dtype = {"I8": np.int8, "F32": "<f4"}[info["dtype"]]
        raw[name] = np.frombuffer(data[base + start:base + end], dtype=dtype).reshape(info["shape"])
    out = {}
    for name, array in raw.items():
        if name.endswith(".s"):
            continue
        if array.dtype == np.int8:
            out[name] = array.astype(np.float32) * raw[name[:-2] + ".s"][:, None]
        else:
            out[name] = array.astype(np.float32)
    return out, header.get("__metadata__", {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--overlay", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.set_num_threads(2)
    enc = Encoder(args.weights)
    tensors, meta = read_overlay(args.overlay)
    params = {}
    for l, layer in enumerate(enc.layers):
        params.update(layer.container_tensors(l))
    for name, value in tensors.items():
        params[name].data = torch.from_numpy(value.reshape(params[name].shape).copy())
    tok = Tokens(args.tokenizer)
    rows = []
    with torch.no_grad():
        for kind, text in TEXTS:
            ids = tok.ids([text], kind, 512 if kind == "query" else 256)
            vector = enc(*batch(ids))[0]
            rows.append({"kind": kind, "text": text, "vector": [round(float(v), 6) for v in vector]})
    with open(args.out, "w") as f:  # one case a line
        f.write(json.dumps({"model": meta.get("version")})[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]}\n")
    print(f"wrote {len(rows)} reference vectors to {args.out}")


if __name__ == "__main__":
    main()
