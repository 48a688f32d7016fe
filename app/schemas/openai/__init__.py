"""The OpenAI API's shapes (as openai-python's types define them) for the /v1 routes."""
