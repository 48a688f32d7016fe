"""简体中文: Signing in, requests the service could not carry out, fields in words, uploaded records."""

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
    "Change your own password with POST /auth/password, which asks for the current one": (
        "请用 POST /auth/password 修改自己的密码（它会核对当前密码）"
    ),
    "Too many sign-ins and password changes are being checked at once; try again in {seconds} s": (
        "同时在核验的登录和改密码请求过多；请在 {seconds} 秒后重试"
    ),
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
    "Many wrong passwords were tried for this account lately, so each sign-in for it carries a proof of work (the admin UI does it by itself): find a number N such that SHA-256 of '<challenge>:N' starts with {bits} zero bits, and send the X-Qatune-Challenge header's value as `challenge` and N as `proof`": "这个账户最近被尝试了很多错误密码，所以每次登录都要附上工作量证明（管理界面会自动完成）：找到一个数字 N，使 '<challenge>:N' 的 SHA-256 以 {bits} 个零比特开头，然后把 X-Qatune-Challenge 响应头的值作为 `challenge`、N 作为 `proof` 一起发送",
    "This account is disabled; an administrator can enable it again": "这个账户已被停用；管理员可以重新启用它",
    "User {user_id} not found; GET /users lists them": "找不到用户 {user_id}；GET /users 列出所有用户",
    "You cannot disable yourself or take your own admin rights; ask another admin": "你不能停用自己，也不能取消自己的管理员权限；请让另一位管理员来做",
    "You cannot delete yourself; ask another admin": "你不能删除自己；请让另一位管理员来做",
    "Job {job_id} of {username} is running: cancel it first (POST /jobs/{job_id}/cancel), or disable the user now and delete them after": "{username} 的任务 {job_id} 正在运行：请先取消它（POST /jobs/{job_id}/cancel），或者现在先停用该用户，之后再删除",
    "An eval run of {username} is still going: cancel it first": "{username} 的一次评测运行仍在进行：请先取消它",
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
    "The model's servers are not ready: {problem}": "模型的服务器尚未就绪：{problem}",
    "The model cannot be served: {problem}": "无法提供该模型：{problem}",
    "Internal error; it has been logged on the server": "内部错误；已记录在服务器日志中",
    "The database is busy with another write; nothing was saved, try again": "数据库正忙于另一"
    "项写入；未保存任何内容，请重试",
    "The database has no free connection for now; nothing was saved, try again": "数据库暂时"
    "没有空闲连接；未保存任何内容，请重试",
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
    "a lone surrogate (a \\ud800 to \\udfff escape without its pair) is not Unicode text; "
    "send the character itself, or both halves of its pair": "单独的代理项（没有配对的 \\ud800 到 "
    "\\udfff 转义）不是 Unicode 文本；请发送字符本身，或其代理对的两半",
    "Text with a NUL character (\\u0000) is not accepted; remove it and send again": (
        "不接受含 NUL 字符（\\u0000）的文本；请删去后重新发送"
    ),
    "{sent} is not accepted; give one of {choices}": "不接受 {sent}；请给出以下之一：{choices}",
    "is not marked as JSON: send it with the header 'Content-Type: application/json'": (
        "没有标明是 JSON：请带上请求头 'Content-Type: application/json' 发送"
    ),
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
    'each record needs "question" and "answer" (or "prompt" and "completion", or alpaca '
    '"instruction"/"output", or OpenAI chat "messages": an optional system message, then user '
    'and assistant messages, or ShareGPT "conversations", or a preference record: OpenAI\'s '
    '"input", "preferred_output", "non_preferred_output" or "prompt", "chosen", "rejected")': (
        '每条记录需要 "question" 和 "answer"（或 "prompt" 和 "completion"，或 alpaca 的 '
        '"instruction"/"output"，或 OpenAI 对话的 "messages"：可选的 system 消息，然后是 user 和 '
        'assistant 消息；或 ShareGPT 的 "conversations"；或偏好记录：OpenAI 的 "input"、'
        '"preferred_output"、"non_preferred_output"，或 "prompt"、"chosen"、"rejected"）'
    ),
    '"conversations" must be a non-empty list of {"from", "value"} turns': '"conversations" '
    '必须是非空的 {"from", "value"} 轮次列表',
    "conversations[{index}].from is {speaker!r}; use {speakers}": "conversations[{index}].from "
    "为 {speaker!r}；请使用 {speakers}",
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
    "a JSON file must hold an array of records, or an object whose one field holds it "
    "({example})": "JSON 文件必须是记录组成的数组，或只有一个字段、其值为该数组的对象（{example}）",
    "the CSV header must name the columns question and answer (or prompt and completion; "
    "instruction and output; prompt, chosen and rejected), separated by commas, semicolons or "
    "tabs; found {header}": "CSV 表头必须包含 question 和 answer 两列（或 prompt 和 completion；"
    "instruction 和 output；prompt、chosen 和 rejected），以逗号、分号或制表符分隔；实际为 {header}",
    "holds NUL bytes: UTF-16 without its byte-order mark, or not a text file; save it as "
    "UTF-8": "含有 NUL 字节：可能是没有字节顺序标记的 UTF-16，或不是文本文件；请保存为 UTF-8",
    "an Excel 97-2003 workbook (.xls) or one saved with a password: save it as .xlsx": (
        "这是 Excel 97-2003 工作簿（.xls）或设置了密码的工作簿：请另存为 .xlsx"
    ),
    "not an Excel workbook (.xlsx): {why}": "不是 Excel 工作簿（.xlsx）：{why}",
    "the workbook has no sheet": "工作簿中没有工作表",
    "the workbook's sheet {name!r} is missing": "找不到工作簿的工作表 {name!r}",
    "{part} is not XML: {why}": "{part} 不是 XML：{why}",
    "a cell names a shared string the workbook lacks": "有单元格引用了工作簿中不存在的共享字符串",
    "a cell lies past the last column a sheet has": "有单元格位于工作表最后一列之后",
    "{part} unpacks to more than 64 MB": "{part} 解压后超过 64 MB",
    "the workbook unpacks to more than 256 MB": "工作簿解压后超过 256 MB",
    "the workbook has no {part}": "工作簿中没有 {part}",
    "{part} cannot be unpacked: {why}": "{part} 无法解压：{why}",
    "{part} is not a workbook's XML (UTF-8, no DTD)": "{part} 不是工作簿的 XML（应为 UTF-8、不含 DTD）",
    "no sheet of the workbook names the columns question and answer (or prompt and "
    "completion; instruction and output; prompt, chosen and rejected) in a row of its first "
    "{rows}; the first sheet's first row holds {header}": "工作簿中没有哪个工作表在前 {rows} 行中"
    "有一行包含 question 和 answer 两列（或 prompt 和 completion；instruction 和 output；prompt、"
    "chosen 和 rejected）；第一个工作表的第一行为 {header}",
    "the columns {names} were not read: a row is read from {fields}": "未读取 {names} 这些列："
    "每行从 {fields} 读取",
    "sheet {name!r}: {note}": "工作表 {name!r}：{note}",
    "the sheet {name!r} was passed over: none of its first {rows} rows names a table's "
    "columns; its first row holds {header}": "已跳过工作表 {name!r}：其前 {rows} 行中没有一行是"
    "表格的列名；其第一行为 {header}",
    "the hidden sheet {name!r} holds a table that was not read: unhide the sheet and upload "
    "again to train on its rows": "隐藏的工作表 {name!r} 中有一个未读取的表格：如需用其中的行训练，"
    "请取消隐藏该工作表后重新上传",
    "the workbook's table is on the hidden sheet {name!r}: unhide the sheet and upload again": (
        "工作簿的表格位于隐藏的工作表 {name!r} 中：请取消隐藏该工作表后重新上传"
    ),
    "broken UTF-16 at offset {start}; save the file as UTF-8": "偏移 {start} 处的 UTF-16 编码"
    "有误；请将文件保存为 UTF-8",
    "expected an object, got {kind}; {accepted}": "应为对象，实际为{kind}；{accepted}",
    "not UTF-8 (byte 0x{byte:02x} at offset {start}); save the file as UTF-8": "不是 UTF-8 "
    "编码（偏移 {start} 处的字节 0x{byte:02x}）；请将文件保存为 UTF-8",
    "invalid JSON: {msg} at column {colno}": "JSON 无效：第 {colno} 列，{msg}",
    "no CSV header": "没有 CSV 表头",
    "malformed CSV: {exc}": "CSV 格式错误：{exc}",
    "unknown record fields {fields}{hint}; {accepted}": "未知的记录字段 {fields}{hint}；{accepted}",
    " (did you mean {names}?)": "（是不是想写 {names}？）",
    "{count} columns, the header has {header}": "有 {count} 列，而表头有 {header} 列",
    "{field} is Excel's error {error}: fix the cell's formula, or type the text in": (
        "{field} 是 Excel 的错误值 {error}：请修正该单元格的公式，或直接填入文字"
    ),
    '{wrong}: put a cell that holds {mark} in double quotes ("Yes{delimiter} we do")': (
        '{wrong}：含有 {mark} 的单元格要用双引号括起来（"Yes{delimiter} we do"）'
    ),
    'missing field "{name}"': '缺少字段 "{name}"',
    '"{name}" must be text, not {kind}': '"{name}" 必须是文本，而不是{kind}',
    '"{name}" is empty': '"{name}" 为空',
    '"rewordings" must be a list of questions, not {kind}': '"rewordings" 必须是问题的列表，而不是{kind}',
    '"rewordings" holds {count} questions; the limit is {limit}': '"rewordings" 有 {count} 个问题；上限为 {limit}',
    '"{name}" is {count} characters; the limit is {limit}': '"{name}" 有 {count} 个字符；上限'
    "为 {limit}",
    "qatune trains text conversations only: remove the record or train it elsewhere": (
        "qatune 只训练文本对话：请删除该记录，或在别处训练它"
    ),
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
    '"{name}" must be a non-empty list of {{"role", "content"}} messages, as a '
    "conversational record's parts are": '"{name}" 必须是非空的 {{"role", "content"}} 消息列表，'
    "与对话格式记录的其他部分一致",
    '"{name}" holds the assistant\'s messages only: the rest is the prompt': '"{name}" 只能包含 '
    "assistant 的消息：其余部分属于 prompt",
    '"chosen" and "rejected" without a "prompt" must be the same conversation up to their '
    "last message, the two answers compared": '没有 "prompt" 时，"chosen" 和 "rejected" 必须是'
    "同一段对话，只有最后一条消息（两个被比较的回答）不同",
    "{field} is the same as the preferred answer: nothing to learn": "{field} 与偏好的回答"
    "相同：没有可学习的内容",
    '"{name}" must be a list of one assistant message': '"{name}" 必须是只含一条 assistant '
    "消息的列表",
    "{field}.name must be text (who said it)": "{field}.name 必须是文本（说话人的名字）",
    '{field}.content: each part\'s "text" must be text': '{field}.content：每个部分的 "text" 必须是文本',
    "{field}.content has parts of type {value}; only text is trained here (images, audio and "
    "files are not); {not_trained}": "{field}.content 含有类型为 {value} 的部分；这里只训练"
    "文本（不训练图片、音频和文件）；{not_trained}",
    'give "tools" or the older "functions", not both': '请给出 "tools" 或较旧的 "functions"，'
    "不要同时给出",
    '{field} must be a function with a name: {{"type": "function", "function": {{"name", '
    '"description", "parameters"}}}}': '{field} 必须是带名字的函数：{{"type": "function", '
    '"function": {{"name", "description", "parameters"}}}}',
    "{field}.role is {role!r}; use system, user, assistant or tool": "{field}.role 为 {role!r}"
    "；请使用 system、user、assistant 或 tool",
    "{field}: only an assistant message calls tools": "{field}：只有 assistant 消息可以调用工具",
    "{field}.tool_call_id must be text, on a tool message": "{field}.tool_call_id 必须是文本，"
    "且只用于 tool 消息",
    "{field}: a function message names its function (name)": "{field}：function 消息需要写明"
    "其函数名（name）",
    '{field} must be {{"id", "type": "function", "function": {{"name", "arguments"}}}}, its '
    "arguments JSON text": '{field} 必须是 {{"id", "type": "function", "function": {{"name", '
    '"arguments"}}}}，其 arguments 为 JSON 文本',
    "messages[{index}]: an assistant message to learn must follow a user message or a tool's "
    "result ({before}); join the two, or give the first weight 0": "messages[{index}]：要学习的"
    " assistant 消息必须跟在 user 消息或工具结果之后（{before}）；请合并这两条，或将第一条的 "
    "weight 设为 0",
    '"{name}": a preferred or non-preferred output is text; tool calls are not compared here': (
        '"{name}"：偏好或非偏好输出必须是文本；这里不比较工具调用'
    ),
    '"{name}" must be a list': '"{name}" 必须是列表',
    "Dataset {dataset_id} not found; GET /datasets lists yours": "找不到数据集 {dataset_id}；"
    "GET /datasets 列出你的数据集",
    "{path} does not take {method}; use {methods}": "{path} 不接受 {method}；请用 {methods}",
    "Nothing is at {path}; GET /docs lists qatune's API": "{path} 处什么也没有；GET /docs 列出 "
    "qatune 的 API",
    "qatune does not serve {path}: of OpenAI's API it serves {served} (GET /docs lists every "
    "endpoint)": "qatune 不提供 {path}：OpenAI 的 API 中它提供 {served}（GET /docs 列出所有端点）",
    "part {index} is {kind}: qatune's models read text only; send the content as text": (
        "第 {index} 部分是 {kind}：qatune 的模型只读文本；请以文本发送内容"
    ),
    "qatune takes a prompt as text, not token ids; send the text": "qatune 接收文本形式的提示，"
    "而不是词元 id；请发送文本",
    "a compressed file (gzip, xz, zstd, 7z or rar): unpack it and upload the file inside": (
        "压缩文件（gzip、xz、zstd、7z 或 rar）：请解压后上传其中的文件"
    ),
    "a Parquet or Arrow table, as the Hugging Face hub stores datasets: write it out as JSON "
    "lines (pandas: to_json(path, orient='records', lines=True)) and upload that": (
        "Parquet 或 Arrow 表（Hugging Face hub 存放数据集的格式）：请导出为 JSON lines"
        "（pandas：to_json(path, orient='records', lines=True)）后上传"
    ),
    "a PDF: qatune trains on question-answer files (JSONL, JSON, CSV or Excel), not on "
    "documents; write the document's questions and answers out as one of those": (
        "PDF：qatune 用问答文件（JSONL、JSON、CSV 或 Excel）训练，而不是文档；请把文档中的问题和"
        "答案写成其中一种格式"
    ),
    "this is {what}": "这是{what}",
    "The file cannot be read: {problem}": "无法读取该文件：{problem}",
    "a zip archive, not an Excel workbook (.xlsx): unpack it and upload the file inside": (
        "zip 压缩包，而不是 Excel 工作簿（.xlsx）：请解压后上传其中的文件"
    ),
}
