"""The limits on what a job trains on: checked by the parser, said in the API's schemas."""

MAX_FIELD_CHARS = 20_000  # a question, an answer or a system prompt
MAX_REWORDINGS = 20  # of one question: each is trained as a pair of its own
MAX_PAIRS = 50_000  # pairs in a file or a job (QATUNE_MAX_DATASET_ROWS may lower it for files)
MAX_REPORTED_PROBLEMS = 100  # a bad file's problems listed; the rest are counted
# The roles of a chat record's messages (OpenAI's format; developer is its newer system,
# function its older tool)
CHAT_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
# ShareGPT's speakers, as those roles
SHAREGPT_ROLES = {
    "system": "system",
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
}
# The role a chat template knows for each: templates speak of system and tool only
_TEMPLATE_ROLES = {"developer": "system", "function": "tool"}


def template_role(role: str) -> str:
    """The role a message of `role` has in a chat template (developer → system, function →
    tool), in training records and in the chats sent to be answered alike."""
    return _TEMPLATE_ROLES.get(role, role)
