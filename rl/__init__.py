"""Turn-reward agentic RL: rendering, advantages, training loops and exporters."""
