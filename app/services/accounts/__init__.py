"""Users, sign-in and API keys."""
