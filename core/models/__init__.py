"""The model behind a run: the Protocol the loop calls, the chat-completions client, token counting, and local models served by llama.cpp."""
