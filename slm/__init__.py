"""Small-model roles (controller, selector, writer): backends, prompts, provisioning."""
