"""Turn-level critic: tool-call accuracy, information gain and logical soundness."""
