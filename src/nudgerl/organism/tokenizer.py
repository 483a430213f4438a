"""A word-level tokenizer for the model organism, built locally with ``tokenizers``.

Every integer 0..MAX_NUMBER is one token, so the tiny model learns arithmetic as small
lookup tables instead of digit carrying. The chat template mirrors ChatML so TRL and the
evaluation code treat the organism exactly like an instruct model.
"""

from __future__ import annotations

from pathlib import Path

from nudgerl.organism.task import MAX_NUMBER, STRATEGIES

PAD, BOS, EOS, UNK = "<pad>", "<|im_start|>", "<|im_end|>", "<unk>"

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|> ' + message['role'] + ' ' + message['content'] + ' <|im_end|> ' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|> assistant ' }}{% endif %}"
)

_FIXED_WORDS = (
    "system user assistant compute mod 10 find the next term : . hint use strategy answer \\boxed{ } "
    "- + = add last two terms"
).split()


def vocabulary(task_words: list[str] | None = None) -> list[str]:
    """The single-family task's words, then ``task_words`` (another task's: new ones appended, so
    every word keeps its id)."""
    words = [PAD, BOS, EOS, UNK] + _FIXED_WORDS
    for s in STRATEGIES.values():
        words += s.words.split() + s.hint.split()
    words += [str(i) for i in range(MAX_NUMBER + 1)] + list(task_words or [])
    seen: dict[str, None] = {}
    for w in words:
        seen.setdefault(w, None)
    return list(seen)


def build_tokenizer(task_words: list[str] | None = None):
    """A ``PreTrainedTokenizerFast`` with ChatML-style template; pad != eos. ``task_words``:
    the extra words of a task other than the single-family one (``families.vocabulary_words()``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(vocabulary(task_words))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    # Join word pieces back with spaces; the grader sees "\boxed{ 26 }".
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


def task_tokenizer(task_module):
    """The tokenizer of a task module (:mod:`~nudgerl.organism.task` or one with ``vocabulary_words``)."""
    return build_tokenizer(task_module.vocabulary_words() if hasattr(task_module, "vocabulary_words") else None)


def save_tokenizer(out_dir: str | Path):
    tok = build_tokenizer()
    tok.save_pretrained(str(out_dir))
    return tok
