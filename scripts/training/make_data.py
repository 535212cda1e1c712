"""Training pairs from the catalog, no hand labels: pseudo-queries that look like what people
type, each with the anime it describes.

Kinds (seeded, so a rerun writes the same file):
- `sentence`: one or two synopsis sentences, names removed, about a third of the content words
  swapped for a WordNet synonym (so a pair cannot be learnt from literal overlap), cut short;
- `tags`: a mood-and-tags template ("something calm about …", "algo tranquilo sobre …") from
  the anime's genres and its tags ranked >= 60;
- `sequel`: a later entry of a franchise, from its own synopsis (not the franchise premise),
  sometimes led by "the season where …";
- `llm`: descriptions the local LLM wrote from a synopsis (`llm_queries.py`, committed as
  `llm_queries.jsonl`; `--llm FILE`), some without their "show about" lead;
- about two thirds of every kind translated to Spanish by Apertium (most users write Spanish).

No query may share more than 4 consecutive words with any case of any evaluation set: such
queries are dropped and counted (`leak_check`).

Input: the shared catalog (AniList's Media JSON lines) and every evaluation set.
Output: `queries.jsonl`: {"query", "lang", "kind", "anime_id"}.
"""

import argparse
import gzip
import json
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

WORDNET = Path("/usr/share/wordnet")
STOP = set("""a an the and or but of to in on at by for with from as into onto about over under
after before while when where who whom whose which that this these those his her their its our
your my he she they we you i it is are was were be been being has have had do does did not no so
than then there here all any some each every one two three new also only just more most such own
same other very can will would could should may might must shall up down out off again further
once him them us me what why how both few many much""".split())
# Capitalised words that carry meaning in a description (places, eras), kept as they are.
KEEP_CAPITALISED = set("""Japan Japanese Tokyo Kyoto Osaka Earth Mars Moon Europe European America
American China Chinese Korea Korean England English France French Germany German Italy Italian
Russia Russian Edo Meiji Taisho Showa Heian Sengoku World War II Christmas God Gods Heaven Hell
Demon King Queen Prince Princess Emperor Empire Kingdom Academy""".split())

EN_MOODS = {
    "Slice of Life": ["calm", "quiet", "relaxing"],
    "Comedy": ["funny", "lighthearted"],
    "Horror": ["scary", "creepy"],
    "Psychological": ["dark", "twisted"],
    "Drama": ["sad", "emotional"],
    "Romance": ["romantic", "sweet"],
    "Action": ["action-packed", "exciting"],
    "Mystery": ["mysterious"],
    "Thriller": ["tense"],
    "Sports": ["sporty", "competitive"],
    "Adventure": ["adventurous", "epic"],
}
ES_MOODS = {
    "Slice of Life": ["tranquilo", "relajado", "cotidiano"],
    "Comedy": ["divertido", "gracioso"],
    "Horror": ["de miedo", "terrorífico"],
    "Psychological": ["oscuro", "psicológico"],
    "Drama": ["triste", "emotivo"],
    "Romance": ["romántico", "bonito"],
    "Action": ["de acción", "con mucha acción"],
    "Mystery": ["misterioso", "de misterio"],
    "Thriller": ["tenso", "de suspenso"],
    "Sports": ["de deportes"],
    "Adventure": ["de aventuras", "épico"],
}
EN_TAG_TEMPLATES = [
    "something {mood} about {tags}",
    "a {mood} anime with {tags}",
    "anime about {tags}",
    "looking for a {mood} show about {tags}",
]
ES_TAG_TEMPLATES = [
    "algo {mood} sobre {tags}",
    "un anime {mood} con {tags}",
    "anime de {tags}",
    "busco algo {mood} de {tags}",
]
EN_SEQUEL_LEADS = ["the season where ", "the part where ", "the sequel in which ", ""]
ES_SEQUEL_LEADS = ["la temporada en la que ", "la parte donde ", "la secuela en la que ", ""]


class WordNet:
    """First-sense synonyms from Debian's WordNet files (index.POS → data.POS at the offset)."""

    def __init__(self, root=WORDNET):
        self.index = {}
        self.data = {}
        for pos in ["noun", "verb", "adj", "adv"]:
            self.data[pos] = open(root / f"data.{pos}", "rb")
            for line in open(root / f"index.{pos}", encoding="latin-1"):
                if line.startswith(" "):
                    continue
                parts = line.split()
                lemma, _, synsets = parts[0], parts[1], int(parts[2])
                pointers = int(parts[3])
                offsets = parts[4 + pointers + 2:]
                assert len(offsets) == synsets
                self.index.setdefault(lemma, []).append((pos, int(offsets[0])))

    def synonyms(self, word):
        out = []
        for pos, offset in self.index.get(word, [])[:1]:
            f = self.data[pos]
            f.seek(offset)
            parts = f.readline().decode("latin-1").split()
            count = int(parts[3], 16)
            for i in range(count):
                lemma = re.sub(r"\(.*\)$", "", parts[4 + 2 * i]).lower()
                if lemma != word and "_" not in lemma and lemma.isalpha():
                    out.append(lemma)
        return out


def sentences(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 4]


def proper_nouns(catalog):
    """Words written capitalised mid-sentence far more often than lower case: names."""
    upper, lower = Counter(), Counter()
    for m in catalog:
        for s in sentences(m.get("description") or ""):
            words = re.findall(r"[A-Za-z][\w'-]*", s)
            for w in words[1:]:
                (upper if w[0].isupper() else lower)[w.lower()] += 1
    return {w for w, n in upper.items() if n > 2 * lower[w]} - {w.lower() for w in KEEP_CAPITALISED}


def title_words(media):
    t = media.get("title") or {}
    names = [t.get("romaji"), t.get("english")] + list(media.get("synonyms") or [])
    words = set()
    for n in names:
        for w in re.findall(r"\w+", n or ""):
            if len(w) > 2 and w.lower() not in STOP:
                words.add(w.lower())
    return words


def scrub(sentence, names, titles):
    """Names and title words out ("someone" for a person's run of names), lower case."""
    tokens = re.findall(r"[\w'-]+|[^\w\s]", sentence)
    out, in_name = [], False
    for i, tok in enumerate(tokens):
        low = tok.lower().removesuffix("'s")
        is_name = (low in titles) or (low in names and (tok[0].isupper() or i > 0))
        if is_name:
            if not in_name:
                out.append("someone")
            in_name = True
            continue
        in_name = False
        out.append(tok)
    text = " ".join(out)
    text = re.sub(r"\s+([,.;:!?])", r"\1", text)
    text = re.sub(r"someone(,? (and|or) someone)+", "some people", text)
    text = re.sub(r"\(\s*someone\s*\)", "", text)
    return text.strip()


# Sentences about the making of a show, not what it is about: no query describes those.
META = re.compile(r"\b(produced|studio|adaptation|adapted|directed|director|episodes?|aired|"
                  r"broadcast|released|premiered|manga|novel|volumes?|serialized|original video|"
                  r"OVA|bundled|blu-ray|DVD|recap|compilation)\b", re.I)


def swap_synonyms(text, wordnet, rng, common, rate=0.35):
    """About `rate` of the content words replaced by a first-sense WordNet synonym that the
    catalog itself uses often (rare lemmas such as "educatee" teach nothing people type)."""
    words = text.split(" ")
    for i, w in enumerate(words):
        core = w.strip(",.;:!?").lower()
        if len(core) < 4 or core in STOP or not core.isalpha() or rng.random() > rate:
            continue
        options = [o for o in wordnet.synonyms(core) if common[o] >= 20]
        if options:
            words[i] = w.lower().replace(core, rng.choice(options))
    return " ".join(words)


def shorten(text, rng, max_words):
    words = text.split()
    if len(words) <= max_words:
        return text
    # People remember a clause, not a whole sentence: cut at a comma when one is near the limit.
    cut = " ".join(words[:max_words])
    comma = cut.rfind(",")
    return cut[:comma] if comma > len(cut) // 2 else cut


def casual(text, rng):
    text = text.rstrip(".")
    if rng.random() < 0.7:
        text = text[:1].lower() + text[1:]
    return text


def translate(texts):
    """English → Spanish with Apertium, one paragraph per text; unknown-word marks removed."""
    if not texts:
        return []
    joined = "\n\n".join(t.replace("\n", " ") for t in texts) + "\n"
    out = subprocess.run(["apertium", "-u", "eng-spa"], input=joined, capture_output=True,
                         text=True, check=True).stdout
    parts = [p.strip() for p in out.split("\n\n")]
    parts = [p for p in parts if p]
    if len(parts) != len(texts):
        # Rare: a paragraph split differently; translate one by one.
        return [translate([t])[0] if len(texts) > 1 else parts[0] for t in texts]
    return parts


def ngrams(text, n=5):
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def eval_ngrams(paths):
    """Every 5-word sequence of every case of every evaluation set."""
    grams = set()
    cases = 0
    for path in paths:
        text = Path(path).read_text()
        rows = json.loads(text) if path.endswith(".json") else [
            json.loads(l) for l in text.splitlines() if l.strip()]
        if isinstance(rows, dict):
            rows = rows.get("cases", [])
        for row in rows:
            q = row.get("query") if isinstance(row, dict) else None
            if q:
                grams |= ngrams(q)
                cases += 1
    return grams, cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--eval", nargs="+", required=True, help="every evaluation set")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=38)
    ap.add_argument("--spanish", type=float, default=0.67)
    ap.add_argument("--llm", help="the LLM's queries (llm_queries.jsonl), merged in")
    args = ap.parse_args()
    rng = random.Random(args.seed)

    catalog = [json.loads(l) for l in gzip.open(args.catalog, "rt")]
    media = {m["id"]: m for m in catalog}
    wordnet = WordNet()
    names = proper_nouns(catalog)
    common = Counter(w for m in catalog
                     for w in re.findall(r"[a-z]+", (m.get("description") or "").lower()))

    rows = []
    for anime_id in sorted(media):
        m = media[anime_id]
        if not m.get("description"):
            continue
        titles = title_words(m)
        own = [s for s in sentences(re.sub(r"<[^>]+>", " ", m["description"]))
               if not META.search(s)]
        # A later entry of a franchise: it has an earlier one in the catalog.
        is_sequel = any(e["relationType"] in ("PREQUEL", "PARENT") and e["node"]["id"] in media
                        for e in (m.get("relations") or {}).get("edges") or [])
        # Sentence queries: one for every anime, a second for one in two.
        for k in range(1 if rng.random() < 0.5 else 2):
            if not own:
                break
            i = rng.randrange(len(own))
            text = source = own[i]
            if rng.random() < 0.3 and i + 1 < len(own):
                text += " " + own[i + 1]
            text = scrub(text, names, titles)
            if text.count("someone") > 2:
                continue
            text = swap_synonyms(text, wordnet, rng, common)
            text = shorten(text, rng, rng.choice([12, 16, 22, 30]))
            if len(text.split()) < 4:
                continue
            kind = "sequel" if is_sequel else "sentence"
            rows.append({"anime_id": anime_id, "kind": kind, "en": casual(text, rng),
                         "lead": rng.randrange(4) if is_sequel else None, "source": source})
        # Tag-and-mood templates for two in five.
        tags = [t["name"] for t in m.get("tags") or []
                if t.get("rank", 0) >= 60 and not t.get("isMediaSpoiler")
                and not t.get("isGeneralSpoiler")]
        if tags and rng.random() < 0.4:
            moods = [g for g in m.get("genres") or [] if g in EN_MOODS]
            rng.shuffle(tags)
            rows.append({"anime_id": anime_id, "kind": "tags", "tags": tags[:3],
                         "mood": rng.choice(moods) if moods else None,
                         "template": rng.randrange(4)})

    # Spanish for about two thirds; Apertium translates in one batch.
    for r in rows:
        r["lang"] = "es" if rng.random() < args.spanish else "en"
    to_translate = [r["en"] for r in rows if r["kind"] != "tags" and r["lang"] == "es"]
    tag_names = sorted({t for r in rows if r["kind"] == "tags" for t in r["tags"]})
    translated = iter(translate(to_translate))
    tag_es = dict(zip(tag_names, translate([t.lower() for t in tag_names])))

    out = []
    for r in rows:
        if r["kind"] == "tags":
            tags = r["tags"] if r["lang"] == "en" else [tag_es[t].lower() for t in r["tags"]]
            joined = tags[0] if len(tags) == 1 else ", ".join(tags[:-1]) + (
                " and " if r["lang"] == "en" else " y ") + tags[-1]
            moods = EN_MOODS if r["lang"] == "en" else ES_MOODS
            template = (EN_TAG_TEMPLATES if r["lang"] == "en" else ES_TAG_TEMPLATES)[r["template"]]
            mood = rng.choice(moods[r["mood"]]) if r["mood"] else ("good" if r["lang"] == "en" else "bueno")
            query = template.format(mood=mood, tags=joined.lower())
            query = query.replace(" good anime", " anime").replace(" anime bueno", " anime")
        else:
            query = r["en"] if r["lang"] == "en" else casual(next(translated), rng)
            if r["kind"] == "sequel" and r["lead"] is not None:
                lead = (EN_SEQUEL_LEADS if r["lang"] == "en" else ES_SEQUEL_LEADS)[r["lead"]]
                query = lead + query[:1].lower() + query[1:]
        # The synopsis sentence it was made from: the trainer finds the passage holding it.
        out.append({"query": query, "lang": r["lang"], "kind": r["kind"],
                    "anime_id": r["anime_id"], "source": r.get("source")})

    if args.llm:
        out += llm_rows(args.llm, args.spanish, args.seed)

    # Nothing that overlaps an evaluation case by five words in a row.
    grams, cases = eval_ngrams(args.eval)
    kept = [o for o in out if not (ngrams(o["query"]) & grams)]
    dropped = len(out) - len(kept)
    with open(args.out, "w") as f:
        for o in kept:
            f.write(json.dumps(o, ensure_ascii=False) + "\n")
    kinds = Counter((o["kind"], o["lang"]) for o in kept)
    print(json.dumps({"queries": len(kept), "dropped_for_overlap": dropped,
                      "eval_cases_checked": cases,
                      "by_kind": {f"{k}/{l}": n for (k, l), n in sorted(kinds.items())}}))


# How the small LLM starts most of its answers; people start with the story as often.
LLM_LEAD = re.compile(r"^(an? )?(anime |show |series )(about |where |that |in which |with |of )", re.I)


def tidy_spanish(text, rng):
    """Apertium's output as typed: one space between words, and the function words it
    capitalises after "anime" ("anime Sobre …") in lower case."""
    text = " ".join(text.split())
    text = re.sub(r"(?<= )(Sobre|Donde|Con|De|En|Que|Dónde)\b", lambda m: m.group(1).lower(), text)
    return casual(text, rng)


def llm_rows(path, spanish, seed):
    """The LLM's queries: half lose their "show about" lead, about two thirds go to Spanish.
    Their own random stream, so the rule-made queries stay as they were without them."""
    rng = random.Random(seed + 1)
    rows = [json.loads(l) for l in Path(path).read_text().splitlines() if l.strip()]
    for r in rows:
        if rng.random() < 0.5:
            r["query"] = LLM_LEAD.sub("", r["query"])
        r["lang"] = "es" if rng.random() < spanish else "en"
    # Apertium reads "show" as a spectacle ("espectáculo"): "anime" says what is meant.
    spanish_texts = iter(translate([re.sub(r"\bshows?\b", "anime", r["query"], flags=re.I)
                                    for r in rows if r["lang"] == "es"]))
    return [{"query": r["query"] if r["lang"] == "en" else tidy_spanish(next(spanish_texts), rng),
             "lang": r["lang"], "kind": "llm", "anime_id": r["anime_id"], "source": None}
            for r in rows]


if __name__ == "__main__":
    main()
