"""简体中文: the service's sentences (English template -> 中文). Placeholders stay as they
are; tests/core/test_language.py checks that every template in app/ is here and that
each keeps its placeholders."""

CATALOGUE: dict[str, str] = {
    # Signing in and permissions
    "Not signed in: send 'Authorization: Bearer <token or API key>' (a token from "
    "POST /auth/token, a key from POST /api-keys)": "未登录：请发送 'Authorization: Bearer "
    "<令牌或 API 密钥>'（令牌由 POST /auth/token 取得，密钥由 POST /api-keys 创建）",
    "Not signed in: send 'Authorization: Bearer <token or API key>'": "未登录：请发送 "
    "'Authorization: Bearer <令牌或 API 密钥>'",
    "Only admins may do this": "只有管理员可以执行此操作",
    "Too many failed sign-ins; try again in {seconds} s": "登录失败次数过多；请在 {seconds} 秒后重试",
    "Wrong username or password": "用户名或密码错误",
    "Token has no subject; sign in again at POST /auth/token": "令牌缺少用户信息；请通过 POST "
    "/auth/token 重新登录",
    "Invalid or expired token; sign in again at POST /auth/token": "令牌无效或已过期；请通过 "
    "POST /auth/token 重新登录",
    "API key {key_id} not found; GET /api-keys lists yours": "找不到 API 密钥 {key_id}；GET "
    "/api-keys 列出你的密钥",
    "Invalid or revoked API key; create one at POST /api-keys": "API 密钥无效或已吊销；请通过 "
    "POST /api-keys 创建一个",
    "The token's user no longer exists; sign in again": "令牌对应的用户已不存在；请重新登录",
    "The password was changed since this token was issued; sign in again": "签发此令牌后密码"
    "已修改；请重新登录",
    "User {username!r} already exists; choose another username": "用户 {username!r} 已存在；"
    "请换一个用户名",
    "The current password is wrong": "当前密码不正确",
    "the password is too weak: {why}. {hint}": "密码太弱：{why}。{hint}",
    "the password needs at least 8 characters": "密码至少需要 8 个字符",
    "the password may have at most 256 characters": "密码最多 256 个字符",
    "it would be guessed quickly": "很快就会被猜出",
    "Use a few uncommon words.": "请使用几个不常见的词。",
    # Requests the service could not read or carry out
    "The body could not be read: send UTF-8 JSON with 'Content-Type: application/json'": (
        "无法读取请求体：请以 'Content-Type: application/json' 发送 UTF-8 编码的 JSON"
    ),
    "The multipart body is broken; send the file as form field 'file' (curl -F "
    "file=@qa.jsonl)": "multipart 请求体已损坏；请以表单字段 'file' 发送文件（curl -F "
    "file=@qa.jsonl）",
    "send the file as multipart form field 'file' (curl -F file=@qa.jsonl)": "请以 multipart "
    "表单字段 'file' 发送文件（curl -F file=@qa.jsonl）",
    "Nothing was saved: {problem}; free space and retry": "未保存任何内容：{problem}；请释放空间"
    "后重试",
    "Invalid request: {summary}": "请求无效：{summary}",
    "That conflicts with existing data; reload and try again": "与现有数据冲突；请刷新后重试",
    "{problem}; retrain the job": "{problem}；请重新训练此任务",
    "Generation failed: {problem}": "生成失败：{problem}",
    "Internal error; it has been logged on the server": "内部错误；已记录在服务器日志中",
    "The database is busy with another write; nothing was saved, try again": "数据库正忙于另一"
    "项写入；未保存任何内容，请重试",
    "The request is over the {limit:g} MB limit; split the data or raise "
    "QATUNE_MAX_UPLOAD_MB": "请求超过了 {limit:g} MB 的上限；请拆分数据或调高 QATUNE_MAX_UPLOAD_MB",
    "The upload is over the {limit:g} MB limit; split it or raise QATUNE_MAX_UPLOAD_MB": (
        "上传内容超过了 {limit:g} MB 的上限；请拆分或调高 QATUNE_MAX_UPLOAD_MB"
    ),
    "The file is over the {limit:g} MB upload limit; split it or raise "
    "QATUNE_MAX_UPLOAD_MB": "文件超过了 {limit:g} MB 的上传上限；请拆分或调高 QATUNE_MAX_UPLOAD_MB",
    "the disk holding qatune's data is full ({free:.0f} MB free)": "存放 qatune 数据的磁盘已满"
    "（剩余 {free:.0f} MB）",
    "the disk holding qatune's data is full": "存放 qatune 数据的磁盘已满",
    # Fields in words (app/api/validation_words.py)
    "is missing": "缺失",
    "is missing: {hint}": "缺失：{hint}",
    "is missing: give {accepted}": "缺失：请给出{accepted}",
    "{field} {problem}": "{field}：{problem}",
    "{field}: {problem}": "{field}：{problem}",
    "{sent} is not accepted; give {accepted}": "不接受 {sent}；请给出{accepted}",
    "{sent} is not accepted; give one of {choices}": "不接受 {sent}；请给出以下之一：{choices}",
    "is not valid JSON ({reason}): send UTF-8 JSON": "不是有效的 JSON（{reason}）：请发送 UTF-8 "
    "编码的 JSON",
    "is not a field here{hint}{fields}": "不是这里的字段{hint}{fields}",
    "; did you mean {name}?": "；你是想写 {name} 吗？",
    " The fields here are: {fields}": "（这里的字段有：{fields}）",
    "text in the form the API reference shows": "API 参考中所示格式的文本",
    "{builtin}, a Hugging Face id such as Qwen/Qwen2.5-0.5B-Instruct (GET /models lists "
    "what is on offer), or (admins) an absolute path to a model directory": "{builtin}、"
    "Hugging Face 模型 id（例如 Qwen/Qwen2.5-0.5B-Instruct，GET /models 列出可选模型），"
    "或（仅管理员）模型目录的绝对路径",
    "1 to 64 letters, digits, '_', '.' or '-'": "1 到 64 个字母、数字、'_'、'.' 或 '-'",
    "letters, digits, '_', '.', '@' or '-'": "字母、数字、'_'、'.'、'@' 或 '-'",
    "a module name: letters, digits, '_' and '.'": "模块名：字母、数字、'_' 和 '.'",
    "a file id such as file-12 (POST /v1/files gives one)": "文件 id，例如 file-12（由 POST "
    "/v1/files 给出）",
    "text that is not blank": "非空白的文本",
    '"password" (OAuth2\'s password grant), or nothing': '"password"（OAuth2 的密码授权），或不填',
    "a value as the API reference shows": "API 参考中所示的值",
    "{first}, or {last}": "{first}或{last}",
    ", ": "、",
    "; ": "；",
    "an object": "一个对象",
    "a list": "一个列表",
    "a file": "一个文件",
    "text": "文本",
    "a whole number": "整数",
    "a number": "数字",
    "true or false": "true 或 false",
    "one of {choices}": "以下之一：{choices}",
    "{kind} from {low} to {high}": "{low} 到 {high} 之间的{kind}",
    "{kind} {low} and {high}": "{low}且{high}的{kind}",
    "{kind} {bound}": "{bound}的{kind}",
    "above {n}": "大于 {n} ",
    "below {n}": "小于 {n} ",
    "at least {n}": "不小于 {n} ",
    "at most {n}": "不大于 {n} ",
    "character": "个字符",
    "characters": "个字符",
    "item": "项",
    "items": "项",
    "entry": "个条目",
    "entries": "个条目",
    "{kind} of {low} to {high} {units}": "{kind}（{low} 到 {high} {units}）",
    "{kind} of at most {high} {units}": "{kind}（最多 {high} {units}）",
    "{kind} of at least {low} {units}": "{kind}（至少 {low} {units}）",
    "null is not a value here; leave the field out": "这里不接受 null；请省略该字段",
    "give exactly one of dataset_id or qa_pairs": "dataset_id 和 qa_pairs 必须且只能给出一个",
    "base_checkpoint_step needs base_job_id: the job it is of": "base_checkpoint_step 需要 "
    "base_job_id：它所属的任务",
    # Uploaded records
    'each record needs "question" and "answer" (or alpaca "instruction"/"output", or '
    'OpenAI chat "messages": an optional system message, then user and assistant messages, '
    'or an OpenAI preference record "input", "preferred_output", "non_preferred_output")': (
        '每条记录需要 "question" 和 "answer"（或 alpaca 的 "instruction"/"output"，或 OpenAI '
        '对话的 "messages"：可选的 system 消息，然后是 user 和 assistant 消息；或 OpenAI 偏好'
        '记录 "input"、"preferred_output"、"non_preferred_output"）'
    ),
    "The {format} file": "{format} 文件",
    "The file": "该文件",
    "{what} has 1 problem; fix it and upload again": "{what}有 1 个问题；请修正后重新上传",
    "{what} has {total} problems{more}; fix them and upload again": "{what}有 {total} 个问题"
    "{more}；请修正后重新上传",
    " (the first {shown} are listed)": "（列出前 {shown} 个）",
    "the file is empty; it needs at least one question-answer pair": "文件为空；至少需要一组问答",
    "too many rows: {rows}, the limit is {max_rows}; split the file or raise "
    "QATUNE_MAX_DATASET_ROWS": "行数过多：{rows} 行，上限为 {max_rows}；请拆分文件或调高 "
    "QATUNE_MAX_DATASET_ROWS",
    "no question-answer pairs found": "没有找到问答对",
    "a JSON file must hold an array of records": "JSON 文件必须是记录组成的数组",
    "the CSV header must name the columns question and answer; found {header}": "CSV 表头必须"
    "包含 question 和 answer 两列；实际为 {header}",
    "expected an object, got {kind}; {accepted}": "应为对象，实际为{kind}；{accepted}",
    "not UTF-8 (byte 0x{byte:02x} at offset {start}); save the file as UTF-8": "不是 UTF-8 "
    "编码（偏移 {start} 处的字节 0x{byte:02x}）；请将文件保存为 UTF-8",
    "invalid JSON: {msg} at column {colno}": "JSON 无效：第 {colno} 列，{msg}",
    "no CSV header": "没有 CSV 表头",
    "malformed CSV: {exc}": "CSV 格式错误：{exc}",
    "unknown record fields {fields}; {accepted}": "未知的记录字段 {fields}；{accepted}",
    "{count} columns, the header has {header}": "有 {count} 列，而表头有 {header} 列",
    'missing field "{name}"': '缺少字段 "{name}"',
    '"{name}" must be text, not {kind}': '"{name}" 必须是文本，而不是{kind}',
    '"{name}" is empty': '"{name}" 为空',
    '"{name}" is {count} characters; the limit is {limit}': '"{name}" 有 {count} 个字符；上限'
    "为 {limit}",
    "qatune trains text conversations only: remove the record or train it elsewhere": (
        "qatune 只训练文本对话：请删除该记录，或在别处训练它"
    ),
    "tool definitions": "工具定义",
    "function definitions": "函数定义",
    "tool calls": "工具调用",
    "a function call": "函数调用",
    '"messages" must be a non-empty list of {"role", "content"} objects': '"messages" 必须是'
    '由 {"role", "content"} 对象组成的非空列表',
    "{field} must be an object with a role and a content": "{field} 必须是包含 role 和 "
    "content 的对象",
    "{field}.weight is {value}; a weight is 0 or 1, on assistant messages (0: not learned, "
    "kept as context)": "{field}.weight 为 {value}；weight 只能是 0 或 1，且只用于 assistant "
    "消息（0：不学习，仅作上下文）",
    "no assistant message to learn: a conversation needs one with weight 1 (the default), or "
    "ends with the user's message (a reinforcement prompt)": "没有可学习的 assistant 消息："
    "对话需要一条 weight 为 1（默认）的 assistant 消息，或以 user 消息结尾（强化学习的提示）",
    '"input" must be an object with "messages"': '"input" 必须是包含 "messages" 的对象',
    '"input.messages" must end with the user\'s message that the outputs answer': (
        '"input.messages" 必须以输出所回答的 user 消息结尾'
    ),
    "the preferred and non-preferred outputs are the same: nothing to learn": "偏好与非偏好"
    "输出相同：没有可学习的内容",
    '"{name}" must be a list of one assistant message': '"{name}" 必须是只含一条 assistant '
    "消息的列表",
    '"{name}": {what} are not trained here; {not_trained}': '"{name}"：这里不训练{what}；'
    "{not_trained}",
    "{field}.role is {role!r}; use system, user or assistant (tool results are not trained "
    "here; {not_trained})": "{field}.role 为 {role!r}；请使用 system、user 或 assistant（这里"
    "不训练工具结果；{not_trained}）",
    "{field}.role is {role!r}; use system, user or assistant": "{field}.role 为 {role!r}；请"
    "使用 system、user 或 assistant",
    "{field}.{name}: {what} are not trained here; {not_trained}": "{field}.{name}：这里不训练"
    "{what}；{not_trained}",
    "{field}.content has parts of type {value}; only text is trained here (images, audio and "
    "files are not); {not_trained}": "{field}.content 含有类型为 {value} 的部分；这里只训练"
    "文本（不训练图片、音频和文件）；{not_trained}",
    "messages[{index}]: an assistant message to learn must follow a user message ({before}); "
    "join the two, or give the first weight 0": "messages[{index}]：要学习的 assistant 消息"
    "必须跟在 user 消息之后（{before}）；请合并这两条，或将第一条的 weight 设为 0",
    '"input.{name}": {what} are not trained here; {not_trained}': '"input.{name}"：这里不训练'
    "{what}；{not_trained}",
    "Dataset {dataset_id} not found; GET /datasets lists yours": "找不到数据集 {dataset_id}；"
    "GET /datasets 列出你的数据集",
    # Models
    "download it on a machine with internet access (`huggingface-cli download {repo_id}`) "
    "and copy the directory here, then use its path as base_model; or use builtin:tiny": (
        "请在能上网的机器上下载（`huggingface-cli download {repo_id}`），把目录复制到这里，"
        "再用它的路径作为 base_model；或使用 builtin:tiny"
    ),
    "{name!r} is not builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, or a configured "
    "model": "{name!r} 不是 builtin:tiny、类似 Qwen/Qwen2.5-0.5B-Instruct 的 hub id，也不是"
    "已配置的模型",
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
    "base_model {name!r} is not builtin:tiny, a hub id like Qwen/Qwen2.5-0.5B-Instruct, or "
    "a configured model (GET /models lists them)": "base_model {name!r} 不是 builtin:tiny、"
    "类似 Qwen/Qwen2.5-0.5B-Instruct 的 hub id，也不是已配置的模型（GET /models 列出它们）",
    "Only admins may train on a server path; ask one to add it to QATUNE_BASE_MODELS": (
        "只有管理员可以用服务器路径训练；请让管理员把它加入 QATUNE_BASE_MODELS"
    ),
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
    "The server is busy: {waiting} requests are already waiting for this model; retry in "
    "{seconds} s": "服务器繁忙：已有 {waiting} 个请求在等待此模型；请在 {seconds} 秒后重试",
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
    "qatune's models do not call tools; send no 'tools'": "qatune 的模型不调用工具；请不要发送 "
    "'tools'",
    "qatune does not return logprobs; leave 'logprobs' unset": "qatune 不返回 logprobs；请不要"
    "设置 'logprobs'",
    # Jobs
    "Job {job_id} not found; GET /jobs lists yours": "找不到任务 {job_id}；GET /jobs 列出你的任务",
    "Job {job_id} is {status}; only paused jobs resume": "任务 {job_id} 的状态为 {status}；"
    "只有已暂停的任务可以继续",
    "Job {job_id} is {status}; cancel it first, then delete it": "任务 {job_id} 的状态为 "
    "{status}；请先取消，再删除",
    "Job {job_id} has already {status}; there is nothing to cancel": "任务 {job_id} 已经是 "
    "{status} 状态；没有可取消的",
    "Job {job_id} is {status}; only queued or running jobs pause": "任务 {job_id} 的状态为 "
    "{status}；只有排队中或运行中的任务可以暂停",
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
    # The OpenAI API: files, fine-tuning, evals, graders
    "No such file: {file_id!r}": "没有这个文件：{file_id!r}",
    "no such file": "没有这个文件",
    "qatune takes files for fine-tuning only: purpose must be 'fine-tune', not "
    "{purpose!r}": "qatune 只接收用于微调的文件：purpose 必须是 'fine-tune'，而不是 {purpose!r}",
    "{field} {name!r} was not uploaded for fine-tune": "{field} {name!r} 不是为 fine-tune 上传的",
    "integrations ({types}) are not supported by qatune: leave them out; a job's metrics "
    "are its events (GET /v1/fine_tuning/jobs/{{id}}/events) and the job page's charts": (
        "qatune 不支持 integrations（{types}）：请省略；任务的指标见其事件（GET "
        "/v1/fine_tuning/jobs/{{id}}/events）和任务页面的图表"
    ),
    "No such fine-tuning job: {job_name!r}": "没有这个微调任务：{job_name!r}",
    "{field} {name!r} is not one of your files; upload it with POST /v1/files": "{field} "
    "{name!r} 不是你的文件；请用 POST /v1/files 上传",
    "{field}: {error}": "{field}：{error}",
    "method reinforcement needs method.reinforcement.grader: the grader that scores each "
    "sampled answer": "method reinforcement 需要 method.reinforcement.grader：为每个采样回答"
    "打分的评分器",
    "reasoning_effort {reasoning_effort!r}: no model served here reasons; leave it out (or "
    "'default')": "reasoning_effort {reasoning_effort!r}：这里提供的模型都不做推理；请省略"
    "（或用 'default'）",
    "qatune's models do not reason: leave reasoning_effort out (or 'none')": "qatune 的模型"
    "不做推理：请省略 reasoning_effort（或用 'none'）",
    "range must be [low, high] with low < high, not {value}": "range 必须是 low < high 的 "
    "[low, high]，而不是 {value}",
    "labels must not repeat": "labels 不能重复",
    "passing_labels {stray} are not among labels {labels}": "passing_labels {stray} 不在 "
    "labels {labels} 之中",
    "the template variable {{{{ {text} }}}} must start with 'item.' or 'sample.'": "模板变量 "
    "{{{{ {text} }}}} 必须以 'item.' 或 'sample.' 开头",
    "the template variable {{{{ {text} }}}} cannot be read at {at!r}: write item.field, "
    'item.list[0] or item["a key"]': "模板变量 {{{{ {text} }}}} 在 {at!r} 处无法读取：请写 "
    'item.field、item.list[0] 或 item["a key"]',
    "Stopped: {exc_param}: {exc_message}": "已停止：{exc_param}：{exc_message}",
    "The model {data_source_model} was deleted during the run": "模型 {data_source_model} "
    "在运行期间被删除",
    "No eval {name!r} of yours; GET /v1/evals lists them": "你没有评估 {name!r}；GET "
    "/v1/evals 列出你的评估",
    "Run {run} of this eval is still going: cancel it first": "此评估的运行 {run} 仍在进行："
    "请先取消",
    "No run {name!r} of this eval; GET …/runs lists them": "此评估没有运行 {name!r}；GET "
    "…/runs 列出所有运行",
    "The run is still going: cancel it first": "该运行仍在进行：请先取消",
    "No output item {name!r} in this run": "此运行中没有输出项 {name!r}",
    "Two testing criteria are named {criterion_name!r}: results are reported by name, so "
    "give each its own": "有两个测试标准都叫 {criterion_name!r}：结果按名称报告，请给每个标准"
    "不同的名称",
    "not a file id": "不是文件 id",
    "No file {source_id!r} of yours: GET /v1/files lists them": "你没有文件 {source_id!r}："
    "GET /v1/files 列出你的文件",
    "File {source_id} holds a record that is not a JSON object: each item must be": "文件 "
    "{source_id} 中有一条记录不是 JSON 对象：每一项都必须是对象",
    "{after!r} is not an output item id": "{after!r} 不是输出项 id",
    "{{{{ {text} }}}} names the item field {variable_path!r}, which the item schema does not "
    "have (it has {fields})": "{{{{ {text} }}}} 引用了项字段 {variable_path!r}，但项的结构中"
    "没有它（结构中有 {fields}）",
    "none": "无",
    "The model {data_source_model!r} does not exist or is not yours: GET /v1/models lists "
    "the models you can use": "模型 {data_source_model!r} 不存在或不属于你：GET /v1/models "
    "列出你可以使用的模型",
    "Python graders are off on this service: an administrator turns them on with "
    "QATUNE_PYTHON_GRADERS=true": "此服务已关闭 Python 评分器：管理员可以用 "
    "QATUNE_PYTHON_GRADERS=true 开启",
    "The cosine metric needs an embedding model, and this service has none: use "
    "fuzzy_match, bleu, gleu, meteor or a rouge metric": "cosine 指标需要嵌入模型，而此服务"
    "没有：请使用 fuzzy_match、bleu、gleu、meteor 或 rouge 指标",
    "The judge model {part_model!r} does not exist or is not yours: GET /v1/models lists "
    "the models you can use": "评判模型 {part_model!r} 不存在或不属于你：GET /v1/models "
    "列出你可以使用的模型",
    # Exports in progress (app/ml/export/)
    "queued": "排队中",
    "ready": "已就绪",
    "loading the base model": "正在加载基础模型",
    "merging the adapter": "正在合并适配器",
    "writing safetensors": "正在写入 safetensors",
    "writing the model card": "正在写入模型卡",
    "converting the merged model to GGUF ({outtype})": "正在把合并后的模型转换为 GGUF（{outtype}）",
    "converting the adapter to a GGUF LoRA": "正在把适配器转换为 GGUF LoRA",
    "converting the base model to GGUF": "正在把基础模型转换为 GGUF",
    "writing the Modelfile": "正在写入 Modelfile",
    "packing the zip": "正在打包 zip",
    # Which weights a run ended with (app/ml/training/judging.py)
    "kept the weights of epoch {epoch:g} (step {step}), {why}": "保留了第 {epoch:g} 轮（第 {step} 步）的权重，因为{why}",
    "kept the final weights (epoch {epoch:g}): no earlier epoch did better on validation ({exact}/{examples} exact)": "保留了最终权重（第 {epoch:g} 轮）：之前没有哪一轮在验证集上更好（{exact}/{examples} 完全一致）",
    "the best on validation: {exact}/{examples} exact, against {final} at the end": "它在验证集上最好：{exact}/{examples} 完全一致，最终只有 {final}",
    "the most training answers learned: {learned}/{examples}, against {final} at the end": "它学会的训练回答最多：{learned}/{examples}，最终只有 {final}",
    # zxcvbn's feedback on a weak password (app/core/security.py)
    "Add another word or two. Uncommon words are better.": "再加一两个词。不常见的词更好。",
    "Capitalization doesn't help very much.": "大写字母帮助不大。",
    "Reversed words aren't much harder to guess.": "倒写的单词并不更难猜。",
    "Predictable substitutions like '@' instead of 'a' don't help very much.": "用 '@' 代替 'a' 这类可预测的替换帮助不大。",
    "Use a few words, avoid common phrases.": "用几个词，避免常见短语。",
    "No need for symbols, digits, or uppercase letters.": "不必使用符号、数字或大写字母。",
    "Straight rows of keys are easy to guess.": "键盘上连成一排的键很容易被猜出。",
    "Short keyboard patterns are easy to guess.": "短的键盘图案很容易被猜出。",
    "This is a top-10 common password.": "这是最常见的 10 个密码之一。",
    "This is similar to a commonly used password.": "这与一个常用密码相似。",
    "A word by itself is easy to guess.": "单独一个词很容易被猜出。",
    "All-uppercase is almost as easy to guess as all-lowercase.": "全大写几乎和全小写一样容易被猜出。",
    "Use a longer keyboard pattern with more turns.": "请使用更长、转折更多的键盘图案。",
    'Repeats like "aaa" are easy to guess.': '像 "aaa" 这样的重复很容易被猜出。',
    'Repeats like "abcabcabc" are only slightly harder to guess than "abc".': '像 "abcabcabc" 这样的重复只比 "abc" 稍难猜一点。',
    "This is a top-100 common password.": "这是最常见的 100 个密码之一。",
    "This is a very common password.": "这是一个非常常见的密码。",
    "Names and surnames by themselves are easy to guess.": "单独的名字和姓氏很容易被猜出。",
    "Common names and surnames are easy to guess.": "常见的名字和姓氏很容易被猜出。",
    "Avoid repeated words and characters.": "避免重复的词和字符。",
    'Sequences like "abc" or "6543" are easy to guess.': '像 "abc" 或 "6543" 这样的序列很容易被猜出。',
    "Avoid sequences.": "避免序列。",
    "Recent years are easy to guess.": "近些年份很容易被猜出。",
    "Dates are often easy to guess.": "日期往往很容易被猜出。",
    "Avoid recent years.": "避免近些年份。",
    "Avoid years that are associated with you.": "避免与你相关的年份。",
    "Avoid dates and years that are associated with you.": "避免与你相关的日期和年份。",
}
