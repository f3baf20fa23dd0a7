"""The training numbers of a spec (TaskSpec.training): each field with the phrasings people use for it.

A field is read where its name and a number meet ("batch size 16", "lr=5e-6", "学习率 1e-5", "8 samples per
prompt", "8 samples per game", "rollouts_per_prompt: 8", "each prompt gets 8 rollouts", "每个 prompt 采样 8 条",
"每局重复 8 次", "每局 4 次采样", "stop training at 300 steps", verl/TRL-style keys "bsz=64", "n_samples=16", the paper's "GRPO (G=8)"). A negative number after a field name is read
too, so that the plan refuses it with the field named (instead of keeping the default and hiding the value).
A field the spec gives twice with different values keeps the first, says so in a note, and leaves the other
unmarked, so it is listed in `unparsed`.

Settings the plan has no field for (LoRA, KL, warmup, gradient accumulation, tensor parallelism, entropy bonus,
prompt length, GPU memory fraction, eval frequency, loggers, ...) get a note naming the config key to edit after
rendering; the numbers stay in `unparsed`.
"""

from __future__ import annotations

import re
from typing import Any

from vibe_rl.planner.text import NUM, SIGNED_NUM, SpecText, to_int

IS = r"\s*(?:of|is|=|:|：|为|是|设为|设置为|to|at)?\s*(?:(?:around|about|roughly|approximately|approx\.?|circa|~|≈|still|大约|大概|约|还是|仍是|仍然|依旧|照旧)\s*)?"
FLOAT = r"(-?\d+(?:\.\d+)?(?:e[-+]?\d+)?)(?!\d|\.\d)"
_NOT_MICRO = r"(?<!micro)(?<!mini)(?<!micro[\s_-])(?<!mini[\s_-])(?<!ppo[\s_-])"
_SAMPLE = r"(?:rollouts?|episodes?|samples?|games?|plays?|generations?|completions?|responses?|trajectories|attempts)"
_PER_TASK = r"(?:task|prompt|group|seed|question|problem|query|game|deal|puzzle)"
# "N steps" alone in its comma part ("who is spy, 8 GPUs, 100 steps.", "use 200 steps", "，200 步，"); with any
# other word ("warmup 10 steps", "save every 50 steps") it is not the step limit
_BARE_STEPS = (rf"(?:\A|(?<=[\n,，;；:：。(（])|(?<=\.\s))\s*(?:(?:please|then|just|use|run|train|training|for|do|with|"
               rf"it|total|of|训练|跑|用|共|总共)\s*)*{NUM}\s*(?:steps|步)(?=\s*(?:\Z|[\n,，.;；。!)）]))")
_STEPS = r"(?:training\s+|gradient\s+|weight\s+|optimi[sz]er\s+|rl\s+|grpo\s+)?(?:steps|updates|iterations)"

FIELDS: dict[str, tuple[list[str], Any]] = {
    "batch_size": ([
        rf"{_NOT_MICRO}(?:batch[\s_-]*size|batchsize|\bbs\b|\bbsz\b|\bbatch(?:\s+of)?|批大小|批次大小|批量大小|批量|batch\s*大小)"
        rf"{IS}{SIGNED_NUM}",
        rf"(?:tasks|groups|prompts)\s+per\s+(?:batch|update|step){IS}{SIGNED_NUM}",
        rf"{NUM}\s*(?:tasks|groups|games|prompts|questions|seeds|个任务|个\s*prompts?|组)\s*(?:per|每|an?|each)\s*"
        rf"(?:batch|update|step|批|iteration|training step|weight update)",
        rf"每(?:批|次更新|步|个\s*step)\s*{NUM}\s*(?:个任务|组|局|个\s*prompts?|个题)",
    ], to_int),
    "grpo_n": ([
        rf"(?:grpo[\s_-]*n|num[\s_-]*repeats?|n[\s_-]*repeat|group[\s_-]*size|组大小|每组|num[\s_-]*generations|"
        rf"n[\s_-]*samples[\s_-]*per[\s_-]*prompt|num[\s_-]*samples|\bn[\s_-]samples\b|(?-i:\bG(?=\s*[=:：]))|rollout\.n\b|\bn(?=\s*[=:：])|\bgroup(?=\s*[=:：])|"
        rf"{_SAMPLE}[\s_-]+per[\s_-]+{_PER_TASK}|每组(?:采样|样本数)){IS}{SIGNED_NUM}",
        rf"{NUM}\s*{_SAMPLE}\s*(?:per|for each|each|/|an?)\s*{_PER_TASK}",
        rf"\bgroups?\s+of\s+{NUM}\b",
        # "each prompt gets 8 rollouts", "repeat each game 8 times", "every task is sampled 8 times", "每局重复 8 次"
        rf"(?:each|every)\s+(?:{_PER_TASK}|game)\s+(?:gets|has|runs|with|is\s+given)\s+{NUM}\s*{_SAMPLE}",
        rf"(?:repeat|sample|play|run|roll\s*out)\w*\s+(?:each|every)\s+(?:{_PER_TASK}|game)\s+{NUM}\s+times",
        rf"(?:each|every)\s+(?:{_PER_TASK}|game)\s+(?:is\s+)?(?:repeated|sampled|played|run|rolled\s+out)\s+{NUM}\s+times",
        rf"每一?(?:局|盘|场)(?:游戏|对局)?\s*(?:重复|采样|跑|玩|rollout|生成)\s*{NUM}\s*(?:次|遍)",
        rf"每一?(?:局|盘|场|个?\s*(?:任务|题|prompts?|问题))(?:游戏|对局)?\s*{NUM}\s*(?:次|遍|条)\s*(?:采样|rollouts?|重复|生成)",
        # "batch of 32 games, 4 samples each": a sample count with "each" alone in its comma part
        rf"(?:\A|(?<=[\n,，;；(（]))\s*{NUM}\s*{_SAMPLE}\s+(?:each|apiece)(?=\s*(?:\Z|[\n,，;；)）]|\.(?!\d)))",
        # "batch 16, group 8" / "bs 32, n eight": a bare "n" or "group" and a number alone in their comma part
        rf"(?:\A|(?<=[\n,，;；(（]))\s*(?:n|group)\s+{NUM}(?=\s*(?:\Z|[\n,，;；)）]|\.(?!\d)))",
        rf"每个?\s*(?:任务|题|种子|prompts?|提示词?|问题)\s*(?:采样|跑|玩|重复|rollout|生成)?\s*{NUM}\s*(?:次|局|条|个|遍)",
    ], to_int),
    "save_freq": ([
        rf"(?:save[\s_-]*freq\w*|save_every|save[\s_-]*steps|save[\s_-]*interval|ckpt[\s_-]*(?:interval|freq\w*)|"
        rf"checkpoint[\s_-]*(?:interval|freq\w*)|保存频率|保存间隔){IS}{SIGNED_NUM}",
        rf"(?:save|checkpoint|ckpt)\w*(?:\s+(?:a|the))?(?:\s+(?:checkpoint|ckpt|model|weights))?\s+every\s+{NUM}\s*"
        rf"(?:steps?|updates?)?",
        rf"每(?:隔)?\s*{NUM}\s*步\s*(?:保存|存)",
    ], to_int),
    "total_steps": ([
        rf"(?:total[\s_-]*(?:training[\s_-]*)?(?:steps|updates)|max[\s_-]*steps|num[\s_-]*(?:training[\s_-]*)?steps|"
        rf"training[\s_-]*steps|train[\s_-]*steps|总步数|训练步数|最大步数|(?<!热身)(?<!预热)(?<!保存)(?<!评估)(?<!日志)(?<!间隔)步数|(?<!warmup )(?<!warm-up )\bsteps(?=\s*[=:：])){IS}{SIGNED_NUM}",
        rf"(?:train|stop|end|finish|halt|run)\w*(?:\s+(?:training|it))?\s+(?:for|after|at)\s+{NUM}\s*{_STEPS}",
        rf"(?:^|(?<=[,.;，。；:：]))\s*steps\s+{NUM}(?!\w|\.\d)(?!\s*(?:per|each|of|times|x\b))",  # "..., steps 300."
        rf"\btotal(?:\s+of)?\s+{NUM}\s*{_STEPS}",
        rf"{NUM}\s*{_STEPS}\s+(?:in\s+)?total",
        rf"{NUM}\s*{_STEPS}\s+of\s+training",
        rf"{NUM}\s*(?:training|gradient|weight|optimi[sz]er|rl|grpo)\s+(?:steps|updates|iterations)",
        rf"(?:训练|跑)\s*{NUM}\s*(?:步|个?\s*steps?)", rf"(?:总共|共)\s*{NUM}\s*步",
        _BARE_STEPS,
    ], to_int),
    "lr": ([rf"(?:\blr\b|learning[\s_-]*rate|学习率){IS}{FLOAT}"], float),
    "temperature": ([rf"(?:temperature|\btemp\b|温度){IS}{FLOAT}"], float),
    "max_tokens": ([
        rf"(?:max[\s_-]*(?:new[\s_-]*)?tokens|max[\s_-]*(?:completion|response|generation|output|answer)[\s_-]*"
        rf"(?:length|len|tokens)|response[\s_-]*length|最大生成长度|最大\s*tokens?(?:\s*数)?|最大输出长度|最大回复长度|"
        rf"最大生成\s*token\s*数?){IS}(-?\d+)",
        rf"max[\s_-]*(?:new[\s_-]*)?tokens\s+(?:per|for each|each|an?)\s+(?:answer|reply|response|turn|call|message|"
        rf"generation|completion){IS}(-?\d+)",
        rf"(?:answers?|replies|responses?|outputs?|generations?|completions?)\s*(?:of|capped at|limited to|up to|"
        rf"at most|<=|≤)\s*{NUM}\s*tokens",
        rf"(?:up to|at most|max(?:imum)?|no more than|最多)\s*{NUM}\s*tokens\s*(?:per|each|an?|for each)\s*(?:answer|reply|response|turn|call|"
        rf"message|generation)",
    ], to_int),
    "max_model_len": ([
        rf"(?:max[\s_-]*model[\s_-]*len(?:gth)?|context[\s_-]*(?:length|len|window)|上下文长度){IS}(\d+)",
    ], to_int),
}

# Settings people name that the plan has no field for: (pattern, what to do). Their numbers stay unparsed.
UNPLACED = [
    (r"\bq?lora\b", "LoRA: the plan has no LoRA field, so the project trains all weights. After rendering set "
                    "model.lora.rank{rank} (and model.lora.alpha) in each server's config YAML."),
    (r"full[\s-]*(?:parameter\s+)?fine[\s-]*tun\w*|full[\s-]*(?:ft|finetune)\b|全参|全量微调",
     "Full fine-tune: every weight trains (the default, model.lora.rank 0)."),
    (r"\bkl\b|kl[\s_-]*(?:coef\w*|penalty|loss|divergence)", "KL term: set train.kl_coef in the config YAML after "
                                                             "rendering (the default 0 disables it)."),
    (r"warm[\s-]*up|预热|热身", "Learning-rate warmup: set train.warmup_steps in the config YAML after rendering."),
    (r"weight[\s_-]*decay|权重衰减", "Weight decay: set train.weight_decay in the config YAML after rendering."),
    (r"micro[\s_-]*batch|mini[\s_-]*batch", "Micro-batch: set train.micro_batch_size in the config YAML after "
                                            "rendering; the plan's batch_size counts tasks (GRPO groups) per update."),
    (r"(?<!mini)(?<!micro)(?<!ppo)(?<!ppo_)[\s_-]?(?:entropy[\s_-]*(?:coef\w*|bonus|loss|reg\w*))|熵",
     "Entropy bonus: the GRPO loss has no entropy term (train.* has no such key); leave it out or add it to the loss."),
    (r"grad(?:ient)?[\s_-]*accum\w*|梯度累积", "Gradient accumulation: set train.micro_batch_size in the config "
                                              "YAML after rendering (an update accumulates batch_size tasks in micro-batches)."),
    (r"max[\s_-]*prompt[\s_-]*(?:length|len|tokens)|最大\s*prompt\s*长度|提示词?长度",
     "Prompt length: there is no separate prompt limit; prompt plus answer must fit model.max_model_len (the plan's max_model_len)."),
    (r"gpu[\s_-]*mem(?:ory)?[\s_-]*util\w*|显存占用比例|显存利用率",
     "GPU memory fraction: set model.kv_cache_gb (GiB for the KV cache, 0 = auto) in the config YAML after rendering."),
    (r"tensor[\s_-]*parallel\w*|\btp[\s_-]*size\b|\btp\s*=|张量并行",
     "Tensor parallelism: not wired in; a server shards the model over its GPUs with FSDP2, so set that server's GPU "
     "count instead (servers[].gpus)."),
    (r"(?:val|eval|test|validation)[\s_-]*(?:freq\w*|every|interval|steps)|\beval(?:uate)?\s+every|验证频率|评估频率|每\s*\d+\s*步\s*(?:评估|验证|测试)",
     "Evaluation: training has no periodic eval step (no config key); export a saved checkpoint (`vibe-rl export`) to evaluate it, or "
     "watch the reward in experiment.dir's metrics."),
    (r"\bwandb\b|weights\s*&\s*biases|\bswanlab\b|\btensorboard\b",
     "Loggers: set experiment.loggers (jsonl, tensorboard, swanlab, wandb) in the config YAML after rendering."),
    (r"\btop[\s_-]*p\b", "top_p: set rollout.top_p in the config YAML after rendering."),
    (r"\bepochs?\b|轮次|个?epoch", "Epochs: training runs by weight updates (total_steps), not passes over the "
                                    "data; give total_steps instead."),
    (r"\bvllm\b|\bsglang\b|\bdeepspeed\b|\bmegatron\b|\bzero[\s-]*[123]\b",
     "Engine: the swarm server generates and trains with its own torch engine (FSDP2 across a server's GPUs); "
     "vLLM, SGLang, DeepSpeed and Megatron are not wired in (model.engine other than torch stops with an error)."),
]


def read_fields(src: SpecText, notes: list[str]) -> dict[str, Any]:
    """Every training field the spec gives (marked as understood); conflicts noted and left unmarked."""
    values: dict[str, Any] = {}
    for name, (patterns, cast) in FIELDS.items():
        found: list[tuple[int, int, Any]] = []
        for pattern in patterns:
            for m in src.finditer(pattern):
                if "\n" in m.group().strip() or any(a < m.end() and m.start() < b for a, b, _ in found):
                    continue
                found.append((m.start(), m.end(), cast(next(g for g in m.groups() if g is not None))))
        if not found:
            continue
        first = found[0]  # the first pattern's first match: the most explicit phrasing
        values[name] = first[2]
        src.source(f"training.{name}", first[0], first[1])
        others = sorted({v for _, _, v in found[1:] if v != first[2]}, key=str)
        for start, end, value in found:
            if value == first[2]:
                src.mark(start, end)
        if others:
            notes.append(f"The spec gives {name} more than once ({', '.join(map(str, [first[2], *others]))}): "
                         f"using {first[2]}; the others are listed as not understood. Say it once.")
    return values


def unplaced_notes(src: SpecText) -> list[str]:
    out = []
    for pattern, note in UNPLACED:
        if re.search(pattern, src.text, re.IGNORECASE):
            rank = re.search(r"(?:rank|\br)\s*(?:of|=|:)?\s*(\d+)", src.text, re.IGNORECASE)
            out.append(note.format(rank=f" (the spec says {rank.group(1)})" if rank else ""))
    return out
