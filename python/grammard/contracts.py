"""The engines' backend contracts grammard's adapters implement: method
names and parameters, with where and when they were read. Written from the
engines' sources and documentation (no code taken); tests/test_contracts.py
checks the adapters against these tables, and, where an engine is
installed, the tables against the engine.

Each entry: class -> {method: parameter names after self}. A parameter
list of None marks a property (an adapter may implement it as a plain
attribute: the engines read and set it on instances).
"""

VLLM_SOURCE = (
    "vllm-project/vllm vllm/v1/structured_output/backend_types.py @ d26c81b6 "
    "(the API of v0.10.1.1; unchanged through v0.14.0, where "
    "structured_output/__init__.py @ 8ae7ba4d was read for the manager)")

VLLM = {
    "StructuredOutputGrammar": {
        "accept_tokens": ("request_id", "tokens"),
        "validate_tokens": ("tokens",),
        "rollback": ("num_tokens",),
        "fill_bitmask": ("bitmask", "batch_index"),
        "is_terminated": (),
        "reset": (),
    },
    "StructuredOutputBackend": {
        "compile_grammar": ("request_type", "grammar_spec"),
        "allocate_token_bitmask": ("max_num_seqs",),
        "destroy": (),
    },
}

# What the vLLM plugin patches (vllm_plugin.py), with the parameters it
# relies on.
VLLM_HOOKS = {
    "StructuredOutputManager": {
        "grammar_init": ("request",),
        "grammar_bitmask": ("requests", "structured_output_request_ids",
                            "scheduled_spec_decode_tokens"),
    },
}

SGLANG_SOURCE = (
    "sgl-project/sglang python/sglang/srt/constrained/"
    "base_grammar_backend.py @ 99e1c516 (register_grammar_backend; the "
    "sglang.srt.plugins entry point group from srt/plugins/__init__.py "
    "@ 32c764af)")

SGLANG = {
    "BaseGrammarObject": {
        "accept_token": ("token",),
        "rollback": ("k",),
        "is_terminated": (),
        "allocate_vocab_mask": ("vocab_size", "batch_size", "device"),
        "fill_vocab_mask": ("vocab_mask", "idx"),
        "move_vocab_mask": ("vocab_mask", "device"),  # staticmethod
        "apply_vocab_mask": ("logits", "vocab_mask"),  # staticmethod
        "copy": (),
        "finished": None,
        "try_jump_forward": ("tokenizer",),
        "jump_forward_str_state": ("helper",),
        "jump_and_retokenize": ("old_output_ids", "new_output_ids",
                                "next_state"),
    },
    "BaseGrammarBackend": {
        "dispatch_json": ("key_string",),
        "dispatch_regex": ("key_string",),
        "dispatch_ebnf": ("key_string",),
        "dispatch_structural_tag": ("key_string",),
        "dispatch_fallback": ("key_type", "key_string"),
        "get_cached_or_future_value": ("key",),
        "set_cache": ("key", "value"),
        "reset": (),
    },
}

SGLANG_STATIC = {("BaseGrammarObject", "move_vocab_mask"),
                 ("BaseGrammarObject", "apply_vocab_mask")}

# register_grammar_backend's factory is called with these.
SGLANG_FACTORY = ("server_args", "tokenizer", "vocab_size", "eos_token_ids")
