"""简体中文: The OpenAI API, exports in progress, kept weights, password feedback."""

CATALOGUE: dict[str, str] = {
    # The OpenAI API: files, fine-tuning, evals, graders
    "{model} is OpenAI's model, which is not served here; start from one of these instead: "
    "{offered}, or one of your fine-tuned models (GET /v1/models lists them)": (
        "{model} 是 OpenAI 的模型，这里不提供；请改用其中之一：{offered}，或你微调过的模型"
        "（GET /v1/models 会列出）"
    ),
    "{model} is not a model here; start from one of these: {offered}, or one of your "
    "fine-tuned models (GET /v1/models lists them)": (
        "这里没有 {model} 这个模型；请从其中之一开始：{offered}，或你微调过的模型"
        "（GET /v1/models 会列出）"
    ),
    "No file {name!r} of yours; GET /v1/files lists them": "你没有文件 {name!r}；GET /v1/files "
    "会列出你的文件",
    "qatune takes files for fine-tuning and evals: purpose must be 'fine-tune' or 'evals', "
    "not {purpose!r}": "qatune 接收用于微调和评测的文件：purpose 必须是 'fine-tune' 或 'evals'，"
    "而不是 {purpose!r}",
    "Dataset {dataset_id} holds an eval's items (uploaded with purpose evals), not training "
    "data: upload that with purpose fine-tune": "数据集 {dataset_id} 里是评测的条目（以 purpose "
    "evals 上传），不是训练数据：训练数据请以 purpose fine-tune 上传",
    "an eval file": "评测文件",
    "is not a JSON object: give {example}": "不是 JSON 对象：请给出 {example}",
    "has {fields} beside item: a line holds item and, optionally, sample": "在 item 之外还有 "
    "{fields}：每一行只含 item，以及可选的 sample",
    "item is not a JSON object": "item 不是 JSON 对象",
    "sample is not a JSON object": "sample 不是 JSON 对象",
    "The eval file has {count} bad lines": "评测文件有 {count} 行有问题",
    "The eval file holds no items: one JSON object a line, {example}": "评测文件里没有条目：每行"
    "一个 JSON 对象，{example}",
    "The eval file has {count} items, more than the {limit} allowed "
    "(QATUNE_MAX_DATASET_ROWS)": "评测文件有 {count} 个条目，超过允许的 {limit} 个"
    "（QATUNE_MAX_DATASET_ROWS）",
    "is not valid JSON ({reason})": "不是有效的 JSON（{reason}）",
    "{field} {name!r} was not uploaded for fine-tune": "{field} {name!r} 不是为 fine-tune 上传的",
    "integrations ({types}) are not supported by qatune: leave them out; a job's metrics "
    "are its events (GET /v1/fine_tuning/jobs/{{id}}/events) and the job page's charts": (
        "qatune 不支持 integrations（{types}）：请省略；任务的指标见其事件（GET "
        "/v1/fine_tuning/jobs/{{id}}/events）和任务页面的图表"
    ),
    "No fine-tuning job {name!r} of yours; GET /v1/fine_tuning/jobs lists them": "你没有微调任务 "
    "{name!r}；GET /v1/fine_tuning/jobs 会列出你的任务",
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
    "File {source_id} holds a record that {problem}": "文件 {source_id} 中有一条记录{problem}",
    "{after!r} is not an id of this list; give the last id of the page before, such as {example}": (
        "{after!r} 不是这个列表里的 id；请给出上一页最后一项的 id，例如 {example}"
    ),
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
    "The run is {status}; it cannot become {target}": "该运行处于 {status} 状态；不能变为 {target}",
    # The python grader's sandbox (app/graders/sandbox/runner.py)
    "the grader wrote a file past its size limit": "评分器写入的文件超过了大小上限",
    "the grader was killed": "评分器被终止",
    "the grader crashed": "评分器崩溃",
    "the grader ended by signal {n}": "评分器因信号 {n} 结束",
    "the sandbox could not start: {exc}": "沙箱无法启动：{exc}",
    "stopped: still running after {seconds:g} s": "已停止：{seconds:g} 秒后仍在运行",
    "stopped: used up its {seconds} s of CPU": "已停止：用完了它的 {seconds} 秒 CPU 时间",
    "the sandbox is busy: no turn came within {seconds:g} s": "沙箱正忙：{seconds:g} 秒内没有轮到这次调用",
    "the grader ended (exit code {code}) without a score": "评分器结束（退出码 {code}）但没有给出分数",
    "the sandbox ended (exit code {code}) without a result: {printed}": "沙箱结束（退出码 {code}）但没有给出结果：{printed}",
    "the grader's result was not a score": "评分器的结果不是分数",
    "the sandbox refused to run the grader, as a protection could not be applied here ({why}); an administrator may accept running without it by naming it in QATUNE_PYTHON_GRADER_WITHOUT": "沙箱拒绝运行评分器，因为这里无法施加一项保护（{why}）；管理员可以在 QATUNE_PYTHON_GRADER_WITHOUT 中写上它的名字，接受在没有它的情况下运行",
    "no score": "没有分数",
    # Chat and text completions: OpenAI's fields that qatune cannot act on
    "qatune does not return logprobs; leave 'top_logprobs' unset": "qatune 不返回 logprobs；请不要设置 'top_logprobs'",
    "qatune samples without penalties; leave 'frequency_penalty' unset or 0": "qatune 采样时不使用惩罚；请不要设置 'frequency_penalty'，或设为 0",
    "qatune samples without penalties; leave 'presence_penalty' unset or 0": "qatune 采样时不使用惩罚；请不要设置 'presence_penalty'，或设为 0",
    "qatune samples without a logit bias; leave 'logit_bias' unset": "qatune 采样时不使用 logit 偏置；请不要设置 'logit_bias'",
    "qatune cannot hold an answer to a JSON format; leave 'response_format' unset or of type text": "qatune 无法把回答限定为 JSON 格式；请不要设置 'response_format'，或将其类型设为 text",
    "qatune's models answer in text only; leave 'modalities' unset or text alone": "qatune 的模型只用文本回答；请不要设置 'modalities'，或只填 text",
    "qatune's models answer in text only; leave 'audio' unset": "qatune 的模型只用文本回答；请不要设置 'audio'",
    "qatune takes no predicted output; leave 'prediction' unset": "qatune 不接受预测输出；请不要设置 'prediction'",
    "qatune's models do not search the web; leave 'web_search_options' unset": "qatune 的模型不搜索网络；请不要设置 'web_search_options'",
    "No model served here reasons; leave 'reasoning_effort' unset": "这里提供的模型都不进行推理；请不要设置 'reasoning_effort'",
    "qatune cannot set an answer's verbosity; leave 'verbosity' unset": "qatune 无法设置回答的详略；请不要设置 'verbosity'",
    "qatune stores no completions; leave 'store' unset or false": "qatune 不存储补全结果；请不要设置 'store'，或设为 false",
    "'functions' is OpenAI's older form of tools; send 'tools' instead": "'functions' 是 OpenAI 旧版的工具写法；请改为发送 'tools'",
    "'function_call' is OpenAI's older form of tool_choice; send 'tool_choice' instead": "'function_call' 是 OpenAI 旧版的 tool_choice 写法；请改为发送 'tool_choice'",
    "qatune does not echo the prompt; leave 'echo' unset or false": "qatune 不回显提示词；请不要设置 'echo'，或设为 false",
    "qatune does not complete around a suffix; leave 'suffix' unset": "qatune 不围绕后缀补全；请不要设置 'suffix'",
    "qatune returns every answer it samples; leave 'best_of' unset and set 'n'": "qatune 返回它采样的每个回答；请不要设置 'best_of'，改为设置 'n'",
    # A Promptfoo suite imported as an eval (app/graders/promptfoo.py)
    "Promptfoo's {kind} assert has no grader here": "Promptfoo 的 {kind} 断言在这里没有对应的评分器",
    "Promptfoo runs JavaScript in its own process; qatune runs none": "Promptfoo 在它自己的进程中运行 JavaScript；qatune 不运行任何 JavaScript",
    "a Promptfoo python assert is not a qatune python grader; rewrite it as one (def grade(sample, item)) in the eval's criteria": "Promptfoo 的 python 断言不是 qatune 的 python 评分器；请在评测的标准中把它改写为一个（def grade(sample, item)）",
    "no grader here passes on any one of several values": "这里没有在多个值中任意一个出现时即通过的评分器",
    "no grader here checks how an answer starts; use contains": "这里没有检查回答开头的评分器；请使用 contains",
    "no grader here matches a regular expression": "这里没有匹配正则表达式的评分器",
    "no grader here counts edits; similar or bleu compare texts": "这里没有计算编辑次数的评分器；similar 或 bleu 可以比较文本",
    "a Promptfoo file is a config (an object) or a list of tests": "Promptfoo 文件应是一个配置（对象）或一个测试列表",
    "tests is a reference ({tests}): put the tests themselves in the file": "tests 是一个引用（{tests}）：请把测试本身写进文件",
    "the file has no tests: give tests, a list of vars and asserts": "文件中没有测试：请提供 tests，即由 vars 和 assert 组成的列表",
    "the file has {count} tests; an eval takes at most {limit}": "文件中有 {count} 个测试；一个评测最多接受 {limit} 个",
    "defaultTest is a reference: put its vars and asserts in the file": "defaultTest 是一个引用：请把它的 vars 和 assert 写进文件",
    "none of the tests' asserts has a grader here: {unmapped}": "测试中的断言在这里都没有对应的评分器：{unmapped}",
    "the tests' asserts make {count} criteria ({names}); an eval holds at most {limit}: split the file": "测试中的断言构成 {count} 个标准（{names}）；一个评测最多容纳 {limit} 个：请拆分文件",
    "{where} must be an object of names and values": "{where} 必须是由名称和值组成的对象",
    "{where}.assert must be a list of asserts, each with a type": "{where}.assert 必须是断言列表，每个断言都有 type",
    "the file uses YAML aliases (*name); write each value out instead": "文件使用了 YAML 别名（*name）；请把每个值都完整写出",
    "the file is neither JSON nor YAML: {why}": "文件既不是 JSON 也不是 YAML：{why}",
    "test {number} is not an object of vars and asserts": "测试 {number} 不是由 vars 和 assert 组成的对象",
    "the file has no prompts; give prompts, such as 'Answer: {{question}}', or tests with one var each": "文件中没有提示词；请提供 prompts，例如 'Answer: {{question}}'，或让每个测试只有一个变量",
    "the prompt {prompt} is in a file or code, which cannot be read from here: write it in the file": "提示词 {prompt} 位于文件或代码中，这里无法读取：请把它写进文件",
    "a prompt's messages cannot be read: {why}": "无法读取提示词的消息：{why}",
    "an llm-rubric needs a judge: name one of your models as judge when importing": "llm-rubric 需要一个评判模型：导入时请把你的某个模型指定为 judge",
    "the tests have no asserts": "测试中没有断言",
    "its value is in a file ({value}), which cannot be read from here": "它的值位于文件中（{value}），这里无法读取",
    "the file is nested too deeply": "文件嵌套层级过深",
    "the file holds a number that is not finite": "文件中有一个不是有限值的数字",
    "test {number}'s {kind} cannot be a criterion here: check the judge's name": "测试 {number} 的 {kind} 在这里无法成为评测标准：请检查评判模型的名称",
}
