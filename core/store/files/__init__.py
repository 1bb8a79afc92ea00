"""The embedded default store: a folder of runs, a journal per run under an flock, watched with inotify."""
