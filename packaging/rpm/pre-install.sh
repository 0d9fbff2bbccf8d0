# deckhand %pre: create the deckhand system group before the files land, so members may use the
# API socket as soon as the agent starts.
getent group deckhand >/dev/null || groupadd -r deckhand
exit 0
