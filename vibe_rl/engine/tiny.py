"""An offline tiny model: a locally trained byte-level BPE tokenizer, a Qwen2.5-style
chat template with tools, and a small random Qwen2ForCausalLM (< 5M parameters).

`ensure_tiny_model()` builds it once into ~/.cache/vibe-rl/<VERSION>/ (or
`$VIBE_RL_CACHE_DIR`) and returns that directory. It is a plain HF model
directory, so loading it goes through the same code path as any real model.
Building is atomic (a temporary directory renamed into place), so concurrent
builders never see a half-written model.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from vibe_rl.extras import require

VERSION = "tiny-qwen2-v1"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EXTRA_TOKENS = ["<tool_call>", "</tool_call>"]  # added, not special: they survive decoding
VOCAB_SIZE = 2048
DEFAULT_SYSTEM = "You are a helpful assistant."
QWEN2_SPLIT = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
               r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")

MODEL_CONFIG = dict(
    hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=4096, rope_theta=10000.0, rms_norm_eps=1e-6,
    tie_word_embeddings=True, hidden_act="silu", initializer_range=0.02,
)

# Qwen2.5's template, with one change: tool-call arguments that are already a JSON
# string (OpenAI wire format) are written as-is instead of being encoded twice.
CHAT_TEMPLATE = (
    "{%- if tools %}{{- '<|im_start|>system\\n' }}"
    "{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- '" + DEFAULT_SYSTEM + "' }}{%- endif %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- else %}{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\n" + DEFAULT_SYSTEM + "<|im_end|>\\n' }}{%- endif %}{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) "
    "or (message.role == 'assistant' and not message.tool_calls) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>' + '\\n' }}"
    "{%- elif message.role == 'assistant' %}{{- '<|im_start|>' + message.role }}"
    "{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}"
    "{%- for tool_call in message.tool_calls %}"
    "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' }}{{- tool_call.name }}{{- '\", \"arguments\": ' }}"
    "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}"
    "{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}{%- endfor %}{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != 'tool') %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' }}{{- message.content }}{{- '\\n</tool_response>' }}"
    "{%- if loop.last or (messages[loop.index0 + 1].role != 'tool') %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

_PROSE = """\
The game starts when every player has received a secret word. Most players share the same word,
but one player, the spy, holds a different yet similar word. Each round, every player describes
their word in one short sentence without saying it. Then all players vote for the one they think
is the spy. The player with the most votes is eliminated. If the spy survives until only two
players remain, the spy wins; otherwise the civilians win.
In werewolves, the village sleeps at night while the wolves choose a victim. The seer checks one
player and learns whether that player is a wolf. The witch may save or poison. During the day the
village discusses and votes. Good players win when every wolf is gone.
Translate the following sentence from French to English. Keep the meaning, the tone and the names.
Answer with the translation only. The translation should be fluent, natural and faithful.
Guess the word: I am thinking of a five letter word. Each guess returns which letters are correct
and in the right place, which are present elsewhere, and which are absent.
Return a JSON object with the keys "name", "arguments", "reward", "score", "winner" and "reason".
Call the tool get_weather with the argument city to find the weather. The function returns a JSON
object. After the tool responds, answer the user in one sentence.
I think player 3 is the spy because the description was vague. I vote for player 2. My word is
an animal that lives in the sea. It is a fruit that is red or green. It is something you drink in
the morning. The answer is yes. The answer is no. Let me think step by step.
You are player 4 in a game of who is spy. Your word is "coffee". Describe it without saying it.
Your description must be one sentence. Do not repeat what other players have said before.
Here is what the other players said in this round. Now vote: reply with the number of a player.
The host announces that player 5 was eliminated. Player 5 was a civilian. The game continues.
The spy has been found. Civilians win the game. Thank you for playing, everyone did well.
Score: the reward is 1 if you win and 0 if you lose. A draw gives half a point to each side.
Please answer in English. Write short, clear and correct sentences with simple words.
The user asked a question about the weather, so the assistant called a tool and read the result.
{"name": "search", "arguments": {"query": "capital of France"}} returns {"result": "Paris"}.
{"role": "user", "content": "hello"} {"role": "assistant", "content": "Hello! How can I help you?"}
Which word does not belong: apple, banana, carrot, orange? The answer is carrot, a vegetable.
Spell the word backwards. Count the letters. Find a word that rhymes with cat: hat, bat, mat.
The quick brown fox jumps over the lazy dog. A journey of a thousand miles begins with one step.
What is two plus three? The answer is five. What is ten minus four? The answer is six.
"""

_WORDS = ("apple banana orange coffee tea milk cat dog tiger lion river ocean mountain city weather "
          "player spy civilian wolf seer witch village vote round word guess letter answer reward "
          "score winner tool function search calculator translate english french german spanish "
          "number json object list true false null name arguments result error hello world").split()


def corpus() -> list[str]:
    """Built-in training text for the tokenizer (English prose, chat markup, JSON, tool calls)."""
    lines = [line for line in _PROSE.splitlines() if line]
    for i, word in enumerate(_WORDS):
        other = _WORDS[(i * 7 + 3) % len(_WORDS)]
        args = json.dumps({"word": word, "player": i % 6, "guess": other})
        lines += [
            f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n<|im_start|>user\nDescribe the word {word}.<|im_end|>\n"
            f"<|im_start|>assistant\nIt is like a {other}, but not quite.<|im_end|>\n",
            f'<tool_call>\n{{"name": "{other}", "arguments": {args}}}\n</tool_call>',
            f"<tool_response>\n{json.dumps({'result': word, 'ok': True})}\n</tool_response>",
            f"Translate '{word}' into French. The {word} and the {other} are in round {i % 5 + 1}.",
        ]
    return lines


def build_tokenizer(directory: Path) -> None:
    tokenizers = require("tokenizers", "building the tiny model's tokenizer")
    transformers = require("transformers", "building the tiny model's tokenizer")
    from tokenizers import decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    # The same pipeline Qwen2Tokenizer rebuilds at load time, so training and use agree.
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    tok.add_tokens([tokenizers.AddedToken(t, special=False, normalized=False) for t in EXTRA_TOKENS])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"], model_max_length=4096,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(directory)
    # Keep the template inside tokenizer_config.json too (older transformers read it there).
    cfg_path = directory / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg["tokenizer_class"] = "Qwen2Tokenizer"
    cfg_path.write_text(json.dumps(cfg, indent=2))


def build_model(directory: Path, seed: int = 0) -> int:
    """Write a random Qwen2ForCausalLM; returns its parameter count."""
    torch = require("torch", "building the tiny model")
    transformers = require("transformers", "building the tiny model")
    tok = transformers.AutoTokenizer.from_pretrained(directory)
    config = transformers.Qwen2Config(
        vocab_size=len(tok), bos_token_id=None, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.pad_token_id, **MODEL_CONFIG,
    )
    torch.manual_seed(seed)
    model = transformers.Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(directory, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def write_tiny_model(directory: str | Path, seed: int = 0) -> int:
    """Build the tiny model into `directory` (created); returns the parameter count."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    build_tokenizer(directory)
    n_params = build_model(directory, seed)
    (directory / "vibe_rl_tiny.json").write_text(json.dumps({"version": VERSION, "parameters": n_params}))
    return n_params


def default_cache_dir() -> Path:
    return Path(os.environ.get("VIBE_RL_CACHE_DIR") or Path.home() / ".cache" / "vibe-rl")


def ensure_tiny_model(cache_dir: str | Path | None = None) -> Path:
    """Return the cached tiny model directory, building it first if needed."""
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    target = root / VERSION
    if (target / "vibe_rl_tiny.json").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{VERSION}-", dir=root))
    try:
        write_tiny_model(tmp)
        try:
            os.rename(tmp, target)  # atomic; fails if another builder got there first
        except OSError:
            if not (target / "vibe_rl_tiny.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target
