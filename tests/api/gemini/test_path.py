"""The model is everything between `models/` and the last `:`."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from proxy.api.gemini.path import split_method

_NAME = st.text(st.sampled_from("abc:./-_0123456789"), min_size=1, max_size=30)


@given(_NAME.filter(lambda n: not n.startswith("models/")),
       st.sampled_from(["generateContent", "streamGenerateContent", "countTokens", "x"]))
def test_model_up_to_the_last_colon(model: str, method: str) -> None:
    assert split_method(f"{model}:{method}") == (model, method)
    assert split_method(f"models/{model}:{method}") == (model, method)


def test_ollama_names_and_what_names_nothing() -> None:
    assert split_method("qwen3:8b:generateContent") == ("qwen3:8b", "generateContent")
    assert split_method("hf.co/org/m:Q4_K_M:countTokens") == ("hf.co/org/m:Q4_K_M",
                                                              "countTokens")
    for rest in ("qwen3", ":generateContent", "qwen3:", ""):
        assert split_method(rest) is None
