"""Training queries written by the local LLM: what someone who forgot the title would type.

The rule-made queries of `make_data.py` are paraphrased synopsis sentences; the evaluation sets
are vaguer (premise, mood, one remembered scene, in the reader's own words), and a model trained
on sentences alone learnt to "find the sentence" (docs/measurements.md, run 3). So a small
instruct model reads each synopsis and writes one such description in English; `make_data.py`
translates about two thirds of them to Spanish (most users write Spanish) and merges them in.

Run once, offline, on the shared catalog; the output is committed as data
(`scripts/training/llm_queries.jsonl`) so training never needs the LLM. Resumable: anime already in
the output are skipped, most popular anime first. Names and title words become "someone" as in
`make_data.py`, and no query shares five words in a row with any case of any evaluation set.

    python llm_queries.py --model qwen.gguf --catalog media.jsonl.gz --eval SETS... --out FILE \
        [--limit 3000] [--threads 2]
"""

import argparse
import gzip
import html
import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from make_data import eval_ngrams, ngrams, proper_nouns, scrub, title_words  # noqa: E402

# The small model writes good casual English and poor Spanish (names kept, run-on sentences,
# checked on a dozen synopses), so it writes English and `make_data.py` translates about two
# thirds of these queries with Apertium, as it does its own.
SYSTEM = ("You are an anime fan who forgot a show's title. You read its synopsis and write, in "
          "your own words, what you would type into a search box to find it: one casual sentence "
          "of 12 to 30 words about the premise, the main character and a detail you remember. "
          "You never write names of characters, places or the title.")
# Two invented shows (no catalog or evaluation text): the style, shown rather than described.
SHOTS = [
    ("Taro Yamada is a high school student who can see the ghosts of cats. When a stray cat "
     "spirit follows him home, he starts helping the spirits of his town find peace before the "
     "summer festival.",
     "high school boy who can see cat ghosts and helps them move on before the summer festival"),
    ("In the year 2150, humanity lives on giant ships after Earth froze. Captain Rei Aoki must "
     "decide whether to land on a strange planet covered by a sentient ocean.",
     "show where people live on huge ships because earth froze over and they find a planet with "
     "a living ocean"),
]


def clean_synopsis(text, max_words=120):
    text = html.unescape(re.sub(r"<[^>]+>", " ", text or ""))
    text = re.sub(r"\((Source|Sources|Note):[^)]*\)", " ", text, flags=re.I)
    text = re.split(r"\n\s*(Note|Source)s?:", text)[0]
    return " ".join(text.split()[:max_words])


def messages(synopsis):
    out = [{"role": "system", "content": SYSTEM}]
    for shot, answer in SHOTS:
        out += [{"role": "user", "content": f"Synopsis: {shot}"},
                {"role": "assistant", "content": answer}]
    return out + [{"role": "user", "content": f"Synopsis: {synopsis}"}]


def tidy(text):
    """First sentence of the first line, without quotes or labels the model sometimes adds."""
    line = next((l for l in text.strip().splitlines() if l.strip()), "")
    line = re.sub(r"^(query|search)\s*:\s*", "", line.strip(), flags=re.I)
    line = re.split(r"(?<=[.!?])\s", line)[0]
    return line.strip(" \"'“”").rstrip(".")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--eval", nargs="+", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=3000, help="most popular anime written for")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=38)
    args = ap.parse_args()

    from llama_cpp import Llama

    with gzip.open(args.catalog, "rt") as f:
        catalog = [json.loads(l) for l in f if l.strip()]
    names = proper_nouns(catalog)
    grams, cases = eval_ngrams(args.eval)
    # A reply that repeats an example's wording is the example, not the synopsis.
    for _, answer in SHOTS:
        grams |= ngrams(answer)
    ranked = sorted((m for m in catalog if len((m.get("description") or "").split()) >= 30),
                    key=lambda m: -(m.get("popularity") or 0))[:args.limit]
    out = Path(args.out)
    done = set()
    if out.exists():
        done = {json.loads(l)["anime_id"] for l in out.read_text().splitlines() if l.strip()}
    llm = Llama(model_path=args.model, n_ctx=2048, n_threads=args.threads, verbose=False,
                seed=args.seed)
    started, written, dropped = time.time(), 0, 0
    with out.open("a") as sink:
        for media in ranked:
            if media["id"] in done:
                continue
            reply = llm.create_chat_completion(
                messages=messages(clean_synopsis(media.get("description"))),
                max_tokens=60, temperature=0.8, top_p=0.9)
            titles = title_words(media)
            # Names the model let through become "someone", as in make_data's sentences.
            query = scrub(tidy(reply["choices"][0]["message"]["content"]), names, titles)
            query = query[:1].lower() + query[1:]
            n = len(query.split())
            if not 6 <= n <= 45 or query.count("someone") > 2 or ngrams(query) & grams:
                dropped += 1
                continue
            sink.write(json.dumps({"anime_id": media["id"], "query": query},
                                  ensure_ascii=False) + "\n")
            sink.flush()
            written += 1
            if written % 25 == 0:
                rate = (time.time() - started) / (written + dropped)
                print(f"{written} written, {dropped} dropped, {rate:.1f} s each", flush=True)
    print(json.dumps({"written": written, "dropped": dropped, "eval_cases": cases,
                      "seconds": round(time.time() - started)}))


if __name__ == "__main__":
    main()
