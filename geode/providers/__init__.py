"""LLM providers: one adapter per wire API, thin vendor endpoints, the model catalogue and retries."""
