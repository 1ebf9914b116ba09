"""Use cases above ``store/``: each module orchestrates the domain code and the store for one of them."""
