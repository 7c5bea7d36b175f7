"""The model side of memd: the Messages API client, the confined memory tool and the prompts."""
