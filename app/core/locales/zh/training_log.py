"""简体中文: a job's log (the training run's events and the job's own), the device and the
memory plan it reports, why a job failed, and an eval run's or an export's failure."""

CATALOGUE: dict[str, str] = {
    # Text kept as it is in every language
    "{text}": "{text}",
    "{parts}": "{parts}",
    # The device and precision (app/ml/device.py)
    "QATUNE_DEVICE={device}": "QATUNE_DEVICE={device}",
    "{device} was fastest in the benchmark recorded on this machine": "本机记录的基准测试中 "
    "{device} 最快",
    "CUDA GPU found: {name}": "找到 CUDA GPU：{name}",
    "Apple GPU (MPS) found: {chip}": "找到 Apple GPU（MPS）：{chip}",
    "no CUDA GPU or Apple GPU found; training on the CPU": "未找到 CUDA GPU 或 Apple GPU；"
    "在 CPU 上训练",
    "torch has MPS built in but it is unavailable (macOS older than 12.3?)": "torch 内置了 "
    "MPS，但它不可用（macOS 低于 12.3？）",
    "{precision} requested for this job": "此任务要求使用 {precision}",
    "CUDA GPU supports bf16: same range as fp32": "CUDA GPU 支持 bf16：数值范围与 fp32 相同",
    "CUDA GPU lacks bf16: fp16 with dynamic loss scaling": "CUDA GPU 不支持 bf16：使用 fp16 "
    "和动态损失缩放",
    "macOS 14+ and torch 2.6+: bf16 on this GPU": "macOS 14+ 且 torch 2.6+：在此 GPU 上使用 bf16",
    "M1/M2 emulate bf16; fp16 autocast with loss scaling": "M1/M2 以模拟方式运行 bf16；使用 fp16 "
    "自动混合精度和损失缩放",
    "bf16 on MPS needs macOS 14 and torch 2.6; fp16 autocast with loss scaling": "MPS 上的 "
    "bf16 需要 macOS 14 和 torch 2.6；使用 fp16 自动混合精度和损失缩放",
    "torch before 2.5 has no MPS autocast: fp32": "torch 2.5 之前没有 MPS 自动混合精度：使用 fp32",
    "CPU has native bf16 (AVX512-BF16/AMX): bf16": "CPU 原生支持 bf16（AVX512-BF16/AMX）：使用 bf16",
    "CPU has no native bf16 (it would be emulated): fp32": "CPU 不原生支持 bf16（只能模拟）："
    "使用 fp32",
    "90% of the GPU's memory": "GPU 显存的 90%",
    "90% of Metal's recommended working set": "Metal 建议工作集的 90%",
    "80% of the RAM available at start": "启动时可用内存的 80%",
    "memory budget: {why}": "内存预算：{why}",
    "{precision} on a {device} machine": "{device} 机器上的 {precision}",
    # The memory plan (app/ml/planner.py)
    "peak ≈ {peak:.2f} GB of {budget:.1f} GB ({device}, {precision}{base}); micro-batch "
    "{tokens} tokens (~{examples} examples) × {steps}, checkpointing {checkpointing}": "峰值约 "
    "{peak:.2f} GB，预算 {budget:.1f} GB（{device}，{precision}{base}）；微批次 {tokens} 个词元"
    "（约 {examples} 条样本）× {steps}，梯度检查点{checkpointing}",
    ", {label} base": "，{label} 基座",
    "on": "开启",
    "off": "关闭",
    # The run (app/ml/training/)
    "Memory before the job": "任务开始前的内存",
    "Memory after the job": "任务结束后的内存",
    "Device {device}: {reasons}. Precision {precision}: {why}": "设备 {device}：{reasons}。"
    "精度 {precision}：{why}",
    "precision: {why}": "精度：{why}",
    "quantization: {why}": "量化：{why}",
    "{cut} example(s) longer than max_seq_length={limit} were cut; raise max_seq_length to "
    "train on whole answers": "{cut} 条样本超过 max_seq_length={limit}，已被截断；调高 "
    "max_seq_length 即可用完整答案训练",
    "No example fits max_seq_length; raise max_seq_length": "没有样本能放进 max_seq_length；"
    "请调高 max_seq_length",
    "Memory plan: {summary}": "内存计划：{summary}",
    "Adapter saved": "适配器已保存",
    "Data parallel: {processes} processes ({backend}), each on its own GPU with 1/{processes} "
    "of every step's examples; gradients summed each step": "数据并行：{processes} 个进程"
    "（{backend}），每个进程使用自己的 GPU，处理每步样本的 1/{processes}；每步汇总梯度",
    "Data parallel: {processes} processes ({backend}), each on its own share of the CPU with "
    "1/{processes} of every step's examples; gradients summed each step": "数据并行："
    "{processes} 个进程（{backend}），每个进程使用自己的一份 CPU，处理每步样本的 1/{processes}；"
    "每步汇总梯度",
    "No layer of this model could be stored in {label} (it has no plain linear layers "
    "bitsandbytes takes): the base trains as stored": "此模型没有可以存为 {label} 的层（没有 "
    "bitsandbytes 能处理的普通线性层）：基座按原样训练",
    "Starting from {model}: its adapter is trained further": "从 {model} 开始：继续训练它的适配器",
    "Fused LoRA linear layers: {fused} (base matmul and rank-{rank} update in one op)": "融合的 "
    "LoRA 线性层：{fused} 个（基座矩阵乘法与秩 {rank} 的更新在同一个算子中完成）",
    "one row of real tokens, attention per example (no padding)": "一行只含真实词元，按样本计算"
    "注意力（无填充）",
    "rows with a block-diagonal mask (this architecture takes no varlen attention)": "多行加块"
    "对角掩码（此架构不支持变长注意力）",
    "Packing: {why}": "打包：{why}",
    "Base in {label}: its linear layers quantized by bitsandbytes, computing in {precision}": (
        "基座为 {label}：线性层由 bitsandbytes 量化，以 {precision} 计算"
    ),
    "LoRA r={rank} alpha={alpha} on {modules}: {trainable:,} trainable of {total:,} "
    "parameters": "LoRA r={rank} alpha={alpha}，作用于 {modules}：{total:,} 个参数中 "
    "{trainable:,} 个可训练",
    "Training {examples} examples {length}, {batch} examples a step, lr {lr:g}": "训练 "
    "{examples} 条样本，{length}，每步 {batch} 条样本，学习率 {lr:g}",
    "until every answer is learned, about {expected} epochs (at most {epochs} epochs, {steps} "
    "steps{raised})": "直到学会每个答案，约 {expected} 轮（最多 {epochs} 轮，{steps} 步{raised}）",
    ", raised up to {longest} steps while answers are still being learned near it": "；接近上限时"
    "仍在学会新答案则最多提高到 {longest} 步",
    "for {epochs} epochs, {steps} steps": "共 {epochs} 轮，{steps} 步",
    "Resumed from the checkpoint of step {step}/{total} (loss so far {loss:.4f})": "已从第 "
    "{step}/{total} 步的检查点恢复（此前损失 {loss:.4f}）",
    "Training on {threads} of {cores} cores: other programs use {others:.1f}": "在 {cores} "
    "个核心中的 {threads} 个上训练：其他程序占用 {others:.1f} 个",
    "Checkpoint saved at step {step}/{total}": "已在第 {step}/{total} 步保存检查点",
    "step {step}/{total} epoch {epoch:.2f}": "第 {step}/{total} 步，第 {epoch:.2f} 轮",
    "step {step} epoch {epoch:.2f} of about {expected:g}": "第 {step} 步，第 {epoch:.2f} 轮"
    "（约 {expected:g} 轮）",
    "{where} loss {loss:.4f}{figures} {speed:,.0f} tok/s ETA {eta:.0f}s": "{where} 损失 "
    "{loss:.4f}{figures} {speed:,.0f} 词元/秒 预计剩余 {eta:.0f} 秒",
    " {figures}": " {figures}",
    "reward margin {value:g}": "奖励差 {value:g}",
    "reward accuracy {value:g}": "奖励准确率 {value:g}",
    "reward mean {value:g}": "平均奖励 {value:g}",
    "reward spread {value:g}": "奖励离散度 {value:g}",
    "KL {value:g}": "KL {value:g}",
    "Out of memory ({message}); retrying the step with {change} (effective batch unchanged, "
    "retry {retry}/{retries})": "内存不足（{message}）；以{change}重试此步（有效批次不变，第 "
    "{retry}/{retries} 次重试）",
    "gradient checkpointing on": "开启梯度检查点",
    "micro-batch {old} → {new} tokens": "微批次 {old} → {new} 个词元",
    "Out of memory on {device} even with micro-batches of {tokens} tokens and gradient "
    "checkpointing ({message}; RSS {rss} MB). Use a smaller base model, a lower "
    "max_seq_length or lora_r, or close other programs": "即使微批次为 {tokens} 个词元并开启"
    "梯度检查点，{device} 上仍内存不足（{message}；RSS {rss} MB）。请使用更小的基座模型、更低的 "
    "max_seq_length 或 lora_r，或关闭其他程序",
    "Out of memory in one of {world} data-parallel processes ({message}); train with fewer "
    "processes or a smaller micro_batch_size": "{world} 个数据并行进程之一内存不足（{message}）；"
    "请用更少的进程或更小的 micro_batch_size 训练",
    # Judgments between epochs and at the end
    "Validation at epoch {epoch:g}: {exact}/{examples} answers exact, loss {loss:.4f}{best}": (
        "第 {epoch:g} 轮验证：{exact}/{examples} 个答案完全正确，损失 {loss:.4f}{best}"
    ),
    " (best so far: kept)": "（目前最佳：已保留）",
    "Kept the weights of epoch {epoch:g} (step {step}), {why}": "保留了第 {epoch:g} 轮"
    "（第 {step} 步）的权重，{why}",
    "Near the time limit ({minutes:g} min): the learning rate settles to zero over {steps} "
    "steps": "接近时间上限（{minutes:g} 分钟）：学习率在 {steps} 步内降到零",
    "Time limit of {minutes:g} min reached at step {step} of {total}: training ends here": (
        "在第 {step}/{total} 步达到 {minutes:g} 分钟的时间上限：训练到此结束"
    ),
    "The trained model answers {learned}/{examples} training questions exactly (greedy)": (
        "训练后的模型完全答对了 {learned}/{examples} 个训练问题（贪婪解码）"
    ),
    "Epoch {epoch}: {learned}/{examples} training answers learned, {tokens:.1%} of their "
    "tokens": "第 {epoch} 轮：学会了 {learned}/{examples} 个训练答案，其词元的 {tokens:.1%}",
    "{written}/{examples} to the questions as written (the first count drops words from "
    "them)": "按原问题答对 {written}/{examples} 个（前一个数是去掉问题中部分词后的）",
    "the {missed} missed as written are trained again in the next epoch": "按原问题答错的 "
    "{missed} 个在下一轮中再次训练",
    "the one missed as written is trained again in the next epoch": "按原问题答错的那 1 个"
    "在下一轮中再次训练",
    "no progress for {epochs} epochs, so the learning rate is cut to {scale:g}x": "连续 "
    "{epochs} 轮没有进展，学习率降为 {scale:g} 倍",
    "answers are still being learned near the cap, so it is raised to {epochs:g} epochs "
    "({steps} steps)": "接近上限时仍在学会新的答案，因此上限提高到 {epochs:g} 轮（{steps} 步）",
    "{reason}, so the learning rate now settles to zero over {steps} steps and training ends "
    "at step {end} (the cap was {cap} epochs)": "{reason}，因此学习率将在 {steps} 步内降到零，"
    "训练在第 {end} 步结束（上限为 {cap} 轮）",
    "every answer is learned": "每个答案都已学会",
    "{given}/{total} answers of the model it started from still given": (
        "它起步的模型的答案仍给出 {given}/{total} 个"
    ),
    "no more were learned for {epochs} epochs at 1/8 of the rate": "以 1/8 的学习率连续 "
    "{epochs} 轮没有学会更多答案",
    "Answer table: none (prompts with no reference answer)": "答案表：无（提示没有参考答案）",
    "Answer table: asking {count} training questions, with the adapter and without it": (
        "答案表：提出 {count} 个训练问题，分别使用和不使用适配器"
    ),
    "Answer table: asking {count} validation questions, with the adapter and without it": (
        "答案表：提出 {count} 个验证问题，分别使用和不使用适配器"
    ),
    "Answer table: {exact}/{questions} exact (the base model alone: {base:.0%}; {reused} "
    "base answers from earlier jobs) in {seconds:.1f} s{cut}": "答案表：{exact}/{questions} "
    "完全正确（仅基座模型：{base:.0%}；{reused} 个基座答案来自之前的任务），用时 "
    "{seconds:.1f} 秒{cut}",
    "; {unfinished} cut short by the time limit": "；{unfinished} 个因时间上限被截断",
    "Validation: loss {loss:.4f}, exact match {exact}/{questions} (the base model alone: "
    "{base:.0%}); {kept}": "验证：损失 {loss:.4f}，完全匹配 {exact}/{questions}（仅基座模型："
    "{base:.0%}）；{kept}",
    "Validation reward at step {step}: {mean:.3f} over {prompts} prompts × {samples} "
    "({seconds:.1f} s)": "第 {step} 步的验证奖励：{mean:.3f}，共 {prompts} 个提示 × {samples}"
    "（{seconds:.1f} 秒）",
    "The grader could not score {errors} of {answers} answers this step (they score 0): "
    "{why}": "本步评分器无法为 {answers} 个答案中的 {errors} 个打分（记为 0 分）：{why}",
    "Grading failed: {why}": "评分失败：{why}",
    "Grading made no progress: no answer was graded for {seconds:g} s ({left} of {total} still waiting)": "评分没有进展：{seconds:g} 秒内没有一个回答被评分（{total} 个中仍有 {left} 个在等待）",
    "Sampling answers failed: {why}": "采样回答失败：{why}",
    "kept {share:.0%} of what the base knew ({kept} of the {known} general questions it answered right)": "保留了基础模型所知的 {share:.0%}（它答对的 {known} 个常识问题中仍答对 {kept} 个）",
    "this training broke the model: it now answers only {kept} of the {known} general questions the base answered right ({share:.0%}); train fewer epochs, at a lower learning_rate, or with more replay": "这次训练损坏了模型：基础模型答对的 {known} 个常识问题，它现在只答对 {kept} 个（{share:.0%}）；请减少训练轮数、降低 learning_rate，或增加 replay",
    "Epoch {epoch:g}: it still gives {share:.0%} of its own answers to the general questions it knew": "第 {epoch:g} 轮：对它原本会答的常识问题，仍给出原来答案的 {share:.0%}",
    "After training it answers {kept} of the {known} general questions it knew ({share:.0%})": "训练后，它原本会答的 {known} 个常识问题中仍答对 {kept} 个（{share:.0%}）",
    "The adapter's scope leaves {outside} of the {known} general questions the model knew to the base model; answering all of them, the adapter alone would keep {alone}": "适配器的范围把模型原本会答的 {known} 个常识问题中的 {outside} 个交给基础模型回答；若全部由适配器回答，它只会保留 {alone} 个",
    "Before training, the model answers {known} of {asked} general questions right: what it knows, to keep": "训练前，模型答对了 {asked} 个常识问题中的 {known} 个：这是它已有的知识，要保留",
    "Before training, the model answers none of {asked} general questions right: it knows nothing to keep": "训练前，模型没有答对 {asked} 个常识问题中的任何一个：没有需要保留的知识",
    "The grader reads {{{{ {variable} }}}}, which example {position} does not have ({why}): add the field to every record, or change the grader": "评分器读取 {{{{ {variable} }}}}，但第 {position} 个样本没有它（{why}）：请在每条记录里加上这个字段，或修改评分器",
    "no progress for {seconds:g} s": "{seconds:g} 秒内没有进展",
    "no answer within the time limit; try again": "在时间限制内没有回答；请重试",
    # The job's own events (app/services/jobs/lifecycle.py, runs.py) and the worker's
    "Job queued: {count} {what} on {on}": "任务已排队：{count} 个{what}，基于 {on}",
    "QA pairs": "问答对",
    "preference pairs (DPO)": "偏好对（DPO）",
    "prompts (reinforcement)": "提示（强化学习）",
    "{model}, trained further": "{model}（继续训练）",
    "Cancelled while {status}": "在{status}时取消",
    "paused": "已暂停",
    "Cancel requested; stopping within a few seconds": "已请求取消；将在几秒内停止",
    "Paused before it started; resume it to queue it again": "在开始前已暂停；恢复即可重新排队",
    "Pause requested; saving a checkpoint and stopping": "已请求暂停；正在保存检查点并停止",
    "Resumed: queued to continue from {where}": "已恢复：排队后从{where}继续",
    "step {step}": "第 {step} 步",
    "the start": "开头",
    "The trained model was deleted": "训练好的模型已删除",
    "Job succeeded": "任务成功",
    "Job cancelled{died}": "任务已取消{died}",
    " ({why} while it was stopping)": "（停止过程中{why}）",
    "Paused at step {step}; resume it to continue from there": "已在第 {step} 步暂停；恢复即可"
    "从那里继续",
    "Paused: {why}. It goes on from {where} by itself once the disk has room again "
    "(QATUNE_DISK_LOW_MB free), or resume it sooner": "已暂停：{why}。磁盘重新有空间"
    "（剩余 QATUNE_DISK_LOW_MB）后会自动从{where}继续，也可以提前恢复",
    "Job failed: {reason}": "任务失败：{reason}",
    "Re-queued ({why}); it continues from {where}": "已重新排队（{why}）；将从{where}继续",
    "the service is stopping": "服务正在停止",
    "stopped": "已停止",
    "The job was given up: {why}, {failures} time(s) with no progress in between": "已放弃此"
    "任务：{why}，共 {failures} 次且期间没有进展",
    # How a run ended that said nothing (app/worker/exits.py, the worker, recovery)
    "the training process was killed ({signal})": "训练进程被终止（{signal}）",
    "the kernel's out-of-memory killer stopped the training process: lower max_seq_length or "
    "micro_batch_size, use a smaller base model, or free memory": "内核的内存不足终止机制停止了"
    "训练进程：请降低 max_seq_length 或 micro_batch_size、使用更小的基座模型，或释放内存",
    "the training process exited unexpectedly (exit code {code}); see the job log": "训练进程"
    "意外退出（退出码 {code}）；请查看任务日志",
    "its worker process died": "它的工作进程已终止",
    "its worker stopped sending heartbeats": "它的工作进程已停止发送心跳",
    "the service was restored from a backup": "服务已从备份恢复",
    "the executor could not run it ({error})": "执行器无法运行它（{error}）",
    "its Ray task ended without a result": "它的 Ray 任务结束时没有结果",
    "the disk has room again: {free} MB free": "磁盘重新有了空间：剩余 {free} MB",
    "Unexpected error: {error}. See the job log": "意外错误：{error}。请查看任务日志",
    "Worker memory before the job: RSS {before} → {after} MB after gc and malloc_trim": (
        "任务开始前工作进程的内存：gc 和 malloc_trim 之后 RSS {before} → {after} MB"
    ),
    "Worker memory after the job: RSS {before} → {after} MB after gc and malloc_trim": (
        "任务结束后工作进程的内存：gc 和 malloc_trim 之后 RSS {before} → {after} MB"
    ),
    "Running on Ray node {host} ({node})": "在 Ray 节点 {host}（{node}）上运行",
    "Adapter received from the Ray node ({mb:.1f} MB) and stored": "已从 Ray 节点收到适配器"
    "（{mb:.1f} MB）并保存",
    # Eval runs and exports, written while no request is answered
    "The service stopped during the run; start a new run": "运行期间服务已停止；请开始新的运行",
    "The service stopped during the run": "运行期间服务已停止",
    "the model could not answer: {why}": "模型无法回答：{why}",
    "the row has no sample.output_text to grade": "这一行没有可评分的 sample.output_text",
    "{problem}: free space and export again ({error})": "{problem}：请释放空间后重新导出（{error}）",
    "it still gives {kept} of the {total} answers the model it started from was trained on ({share:.0%})": "它起步的模型所训练的 {total} 个答案中，它仍给出 {kept} 个（{share:.0%}）",
    "it cost the model it started from {lost} of the {total} answers it was trained on (it still gives {share:.0%}); train fewer epochs or at a lower learning_rate (for DPO, a higher beta), or add those answers to this job's data": "这次训练让它起步的模型丢失了所训练的 {total} 个答案中的 {lost} 个（仍给出 {share:.0%}）；请减少训练轮数或降低 learning_rate（DPO 可调高 beta），或把这些答案加入本任务的数据",
    "It still gives {kept} of the {total} answers the model it started from was trained on ({share:.0%})": "它起步的模型所训练的 {total} 个答案中，它仍给出 {kept} 个（{share:.0%}）",
    "every one of the {answers} answers sampled in {steps} steps scored 0, so no step could move the model; check the grader on a few of the model's own answers (the graders' run endpoint), or teach the answers first with supervised pairs and train that model further": "{steps} 步中采样的 {answers} 个答案全部得 0 分，任何一步都无法改变模型；请先用模型自己的几个答案检查评分器（评分器的运行端点），或先用监督问答对教会这些答案，再在那个模型上继续训练",
    "the sampled answers turned to noise ({share:.0%} of their tokens distinct, {own:.0%} at the start): the grader rewards something other than good answers, or the steps are too large; use a grader that scores the whole answer (string_check, or a model grader), a higher beta, or a lower learning_rate": "采样的答案变成了乱码（不同词元占 {share:.0%}，开始时为 {own:.0%}）：评分器奖励的不是好答案，或者步子太大；请使用对整个答案打分的评分器（string_check 或模型评分器）、更高的 beta，或更低的 learning_rate",
    "Reinforcement ends at step {step}: {reason}": "强化训练在第 {step} 步结束：{reason}",
    "before the sampled answers turned to noise": "在采样的答案变成乱码之前",
    "reinforcement ended at step {step}: every sampled answer scored 0, so no step could move the model; check the grader on a few of the model's own answers, or teach the answers first with supervised pairs": "强化训练在第 {step} 步结束：每个采样的答案都得 0 分，任何一步都无法改变模型；请先用模型自己的几个答案检查评分器，或先用监督问答对教会这些答案",
    "reinforcement ended at step {step}: the sampled answers turned to noise, and the weights from before that are kept; use a grader that scores the whole answer, a higher beta, or a lower learning_rate": "强化训练在第 {step} 步结束：采样的答案变成了乱码，保留了此前的权重；请使用对整个答案打分的评分器、更高的 beta，或更低的 learning_rate",
}
