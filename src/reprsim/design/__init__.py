"""A study's design as its configuration states it, torch-free: how the models are related, which datasets have labels,
conditionings, the dimension placebo, the senses of similarity, the training-set perturbations. The configuration
check, the rules and the stages read it."""
