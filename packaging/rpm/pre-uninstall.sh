# deckhand %preun ($1: 0 = erase, 1 = upgrade). On erase, stop and disable the service. Its
# containers keep running: they belong to Docker.
if [ "$1" -eq 0 ] && command -v systemctl >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
        systemctl --no-reload disable --now deckhand.service >/dev/null 2>&1 || :
    else
        systemctl --no-reload disable deckhand.service >/dev/null 2>&1 || :
    fi
fi
exit 0
