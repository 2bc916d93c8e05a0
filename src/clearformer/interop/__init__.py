"""Import and export: Hugging Face MarianMT and GPT-2 checkpoints in, MarianMT and CTranslate2 out.

    hf.py           reading a Transformers folder safely (safetensors; config fields checked)
    marian.py       clearformer translation model <-> MarianMTModel (weights, config, tokenizer files)
    gpt2.py         GPT2LMHeadModel -> clearformer language model
    ctranslate2.py  an exported Marian folder -> a CTranslate2 model directory
"""
