"""The training numbers of a spec (TaskSpec.training): each field with the phrasings people use for it.

A field is read where its name and a number meet (vibe_rl.planner.table): "batch size 16", "lr=5e-6", "学习率
1e-5", "8 samples per prompt", "rollouts_per_prompt: 8", "each prompt gets 8 rollouts", "每个 prompt 采样 8 条",
"每局重复 8 次", "stop training at 300 steps", keys "bsz=64", "n_samples=16", "GRPO (G=8)". A negative number
is read too, so that the plan refuses it with the field named (instead of keeping the default and hiding it).

Settings the plan has no field for (LoRA, KL, warmup, gradient accumulation, tensor parallelism, entropy bonus,
prompt length, GPU memory fraction, eval frequency, loggers, ...) get a note naming the config key to edit after
rendering; their numbers stay in `unparsed`.
"""

from __future__ import annotations

import re

from vibe_rl.planner.table import Row
from vibe_rl.planner.text import SpecText

_NOT_MICRO = r"(?<!micro)(?<!mini)(?<!micro[\s_-])(?<!mini[\s_-])(?<!ppo[\s_-])"
_SAMPLE = r"(?:rollouts?|episodes?|samples?|games?|plays?|generations?|completions?|responses?|trajectories|attempts)"
_PER_TASK = r"(?:task|prompt|group|seed|question|problem|query|game|deal|puzzle)"
_N = r"(?:\d+|[零一二两三四五六七八九十百千万]+|[a-z]+(?:-[a-z]+)?)"  # a number ahead, in any of its forms
_ALONE = r"(?=\s+"+_N+r"(?:\s*$|\s*[\n,，;；)）]|\.(?!\d)))"  # a bare key whose number ends its comma part
_START = r"(?:^|(?<=[\n,，;；(（]))\s*"
_STEPS = r"(?:training\s+|gradient\s+|weight\s+|optimi[sz]er\s+|rl\s+|grpo\s+)?(?:steps|updates|iterations)"
_PER_STEP = r"(?:per|每|an?|each)\s*(?:batch|update|step|批|iteration|training step|weight update)"

# The training fields (TaskSpec.training): one row each. Words are regex fragments (vibe_rl.planner.table).
TRAINING = [
    Row("batch_size", en=(rf"{_NOT_MICRO}batch[\s_-]*size", "batchsize", "bs", "bsz", rf"{_NOT_MICRO}batch(?:\s+of)?",
                          r"(?:tasks|groups|prompts)\s+per\s+(?:batch|update|step)",
                          r"(?:each|every)\s+(?:update|step|batch)\s+(?:uses|has|takes|trains\s+on)(?=\s+"+_N+r"\s+"
                          r"(?:tasks|groups|prompts))"),
        zh=("批大小", "批次大小", "批量大小", "批量", r"batch\s*大小", r"[每一](?:批|次更新|步|个\s*step)\s*(?:用|使用)?(?=\s*"+_N+r"\s*(?:个任务|组|局|个\s*prompts?|个题|道题))"),
        after=(rf"(?:tasks|groups|games|prompts|questions|seeds|个任务|个\s*prompts?|组)\s*{_PER_STEP}",)),
    Row("grpo_n", en=(r"grpo[\s_-]*n", r"num[\s_-]*repeats?", r"n[\s_-]*repeat", r"group[\s_-]*size", r"num[\s_-]*generations",
                      r"n[\s_-]*samples[\s_-]*per[\s_-]*prompt", r"num[\s_-]*samples", r"n[\s_-]samples", r"(?-i:G)(?=\s*[=:：])",
                      r"rollout\.n", r"n(?=\s*[=:：])", r"group(?=\s*[=:：])", rf"{_SAMPLE}[\s_-]+per[\s_-]+{_PER_TASK}",
                      r"groups?\s+of", rf"{_START}(?:n|group){_ALONE}",
                      rf"(?:each|every)\s+(?:{_PER_TASK}|game)\s+(?:gets|has|runs|with|is\s+given)(?=\s+"+_N+rf"\s*{_SAMPLE})",
                      rf"(?:repeat|sample|play|run|roll\s*out)\w*\s+(?:each|every)\s+(?:{_PER_TASK}|game)(?=\s+"+_N+r"\s+times)",
                      rf"(?:each|every)\s+(?:{_PER_TASK}|game)\s+(?:is\s+)?(?:repeated|sampled|played|run|rolled\s+out)(?=\s+"+_N+r"\s+times)"),
        zh=("组大小", "每组(?:采样|样本数)?", r"每一?(?:局|盘|场)(?:游戏|对局)?\s*(?:重复|采样|跑|玩|rollout|生成)(?=\s*"+_N+r"\s*(?:次|遍))",
            r"每一?(?:局|盘|场|个?\s*(?:任务|题|prompts?|问题))(?:游戏|对局)?(?=\s*"+_N+r"\s*(?:次|遍|条)\s*(?:采样|rollouts?|重复|生成))",
            r"每[个道]?\s*(?:任务|题|种子|prompts?|提示词?|问题)\s*(?:采样|跑|玩|重复|rollout|生成)?(?=\s*"+_N+r"\s*(?:次|局|条|个|遍))"),
        after=(rf"{_SAMPLE}\s*(?:per|for each|each|/|an?)\s*{_PER_TASK}",
               rf"{_SAMPLE}\s+(?:each|apiece)(?=\s*(?:$|[\n,，;；)）]|\.(?!\d)))")),
    Row("save_freq", en=(r"save[\s_-]*freq\w*", "save_every", r"save[\s_-]*steps", r"save[\s_-]*interval",
                         r"ckpt[\s_-]*(?:interval|freq\w*)", r"checkpoint[\s_-]*(?:interval|freq\w*)",
                         r"(?:save|checkpoint|ckpt)\w*(?:\s+(?:a|the))?(?:\s+(?:checkpoint|ckpt|model|weights))?\s+every"),
        zh=("保存频率", "保存间隔", r"(?:save|保存)\s*每(?:隔)?", r"每(?:隔)?(?=\s*"+_N+r"\s*步\s*(?:保存|存))"), unit=("steps?", "updates?", r"步\s*(?:保存|存)")),
    Row("total_steps", en=(r"total[\s_-]*(?:training[\s_-]*)?(?:steps|updates)", r"max[\s_-]*steps",
                           r"num[\s_-]*(?:training[\s_-]*)?steps", r"training[\s_-]*steps", r"train[\s_-]*steps",
                           r"(?<!warmup )(?<!warm-up )(?<!_)steps(?=\s*[=:：])", r"(?:^|(?<=[\n,.;，。；:：]))\s*steps(?=\s+\d+(?!\w|\.\d)(?!\s*(?:per|each|of|times|x\b)))",
                           r"(?:train|stop|end|finish|halt|run)\w*(?:\s+(?:training|it))?\s+(?:for|after|at|until)(?=\s+"+_N+r"\s*" + _STEPS + ")",
                           r"total(?:\s+of)?(?=\s+"+_N+r"\s*" + _STEPS + ")"),
        zh=("总步数", "训练步数", "最大步数", r"(?<!热身)(?<!预热)(?<!保存)(?<!评估)(?<!日志)(?<!间隔)步数",
            r"(?:训练|跑)到?(?=\s*"+_N+r"\s*(?:步|个?\s*steps?))", r"(?:总共|共)(?=\s*"+_N+r"\s*步)",
            # "N steps" alone in its comma part ("who is spy, 8 GPUs, 100 steps.", "，200 步，"), after a verb at most
            r"(?:\A|(?<=[\n,，;；:：。(（])|(?<=\.\s))\s*(?:(?:please|then|just|use|run|train|training|for|do|with|it|total|of|"
            r"训练|跑|用|共|总共)\s*)*(?="+_N+r"\s*(?:steps|步)(?=\s*(?:\Z|[\n,，.;；。!)）])))"),
        unit=(_STEPS, "步", r"个?\s*steps?"),
        after=(rf"{_STEPS}\s+(?:in\s+)?total", rf"{_STEPS}\s+of\s+training",
               r"(?:training|gradient|weight|optimi[sz]er|rl|grpo)\s+(?:steps|updates|iterations)")),
    Row("lr", en=("lr", r"learning[\s_-]*rate"), zh=("学习率",), type=float),
    Row("temperature", en=("temperature", "temp"), zh=("温度",), type=float),
    Row("max_tokens", en=(r"max[\s_-]*(?:new[\s_-]*)?tokens(?:\s+(?:per|for each|each|an?)\s+(?:answer|reply|response|turn|call|"
                          r"message|generation|completion))?",
                          r"max[\s_-]*(?:completion|response|generation|output|answer)[\s_-]*(?:length|len|tokens)",
                          r"response[\s_-]*length",
                          r"(?:answers?|repl(?:y|ies)|responses?|outputs?|generations?|completions?)\s*(?:of|capped at|limited to|"
                          r"up to|at most|<=|≤)(?=\s*"+_N+r"\s*tokens)"),
        zh=("最大生成长度", r"最大\s*tokens?(?:\s*数)?", "最大输出长度", "最大回复长度", r"最大生成\s*token\s*数?",
            r"(?:回复|回答|输出|生成)(?:最多|至多|不超过)(?=\s*"+_N+r"\s*个?\s*tokens?)"),
        unit=("tokens",),
        after=(r"(?:new\s+)?tokens\s*(?:per|each|an?|for each)\s*(?:answer|reply|response|turn|call|message|generation)",)),
    Row("max_model_len", en=(r"max[\s_-]*model[\s_-]*len(?:gth)?", r"context[\s_-]*(?:length|len|window)"), zh=("上下文长度",)),
]

# What a mock dataset holds ("mock 64 sentence pairs", "生成 50 篇论文", "100 mock papers")
_ITEMS = (r"games|tasks|paragraphs|(?:sentence\s+|translation\s+)?pairs|sentences|examples|clauses|documents|docs|"
          r"abstracts|papers|articles|texts|passages|prompts|questions|problems|puzzles|items|records|entries|cases|"
          r"scenarios|dialogues|conversations|stories|seeds|boards|levels|对局|局|个任务|条|段|对|句|篇|道题|个问题")
# Game parameters every family may have (a family's own rows are in its manifest: parameters.<name>.words)
GAME = [
    Row("num_tasks", en=(r"num[\s_-]*tasks",),
        zh=(rf"(?:(?<![A-Za-z])(?:mock|generate|simulate)|生成|造|模拟)[^\d\n,.;，。；]{{0,12}}?(?=\d+\s*(?:{_ITEMS}))",),
        unit=(_ITEMS,),
        after=(rf"(?:mock|synthetic|generated|simulated)\s+(?:{_ITEMS})",)),
]

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


def unplaced_notes(src: SpecText) -> list[str]:
    rank = re.search(r"(?:rank|\br)\s*(?:of|=|:)?\s*(\d+)", src.text, re.IGNORECASE)
    said = f" (the spec says {rank.group(1)})" if rank else ""
    return [note.format(rank=said) for pattern, note in UNPLACED if re.search(pattern, src.text, re.I)]
