# deckhand %postun ($1: 0 = erase, 1 = upgrade; this is the OLD package's script on upgrade).
# On upgrade, restart a running agent on the new binary (its containers survive and are
# re-adopted). On erase, reload systemd; rpm itself deletes the package's directories
# (/etc/deckhand/tasks.d among them) once they are empty, so task files, and the directory
# holding them, are kept. rpm has no purge: the state in /var/lib/deckhand is kept (delete it by
# hand), and a modified deckhand.conf is kept as deckhand.conf.rpmsave. The deckhand group is
# kept, as on Debian.
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then
    systemctl daemon-reload >/dev/null 2>&1 || :
    if [ "$1" -ge 1 ]; then
        systemctl try-restart deckhand.service >/dev/null 2>&1 || :
    fi
fi
exit 0
