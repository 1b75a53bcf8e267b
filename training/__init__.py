"""Selector dataset building and LoRA fine-tuning."""
