"""A rendered release as processes on this machine (`pdctl up`, `pdctl down`): the plan of the
processes (layout), the per-release state folder (state), the supervisor that starts and stops
them (supervisor), and the commands' library side (run)."""
