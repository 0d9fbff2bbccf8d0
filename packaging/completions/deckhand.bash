# bash completion for deckhand, generated from deckhand's command table (src/cli/command_table.rs).
_deckhand_tasks() {
    deckhand ps --all 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_deckhand() {
    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"
    local verb="" operands=0 i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case "${COMP_WORDS[i]}" in
            --socket|--config|--since|--tail|-n) ((i++)) ;;
            -*) ;;
            *) if [[ -z "$verb" ]]; then verb="${COMP_WORDS[i]}"; else ((operands++)); fi ;;
        esac
    done
    case "$prev" in
        --socket|--config) COMPREPLY=($(compgen -f -- "$cur")); return ;;
        --socket|--config|--since|--tail|-n) return ;;
    esac
    if [[ -z "$verb" ]]; then
        COMPREPLY=($(compgen -W "run submit stop ps top inspect events logs validate convert help --socket --help -h --version -V" -- "$cur"))
        return
    fi
    local flags="" kind=""
    case "$verb" in
        run) flags="--config" kind="" ;;
        submit) flags="" kind="file" ;;
        stop) flags="--wait" kind="task" ;;
        ps) flags="--all -a --json" kind="" ;;
        top) flags="--once --json" kind="" ;;
        inspect) flags="" kind="task" ;;
        events) flags="--follow -f --since" kind="" ;;
        logs) flags="--follow -f --tail -n --since --timestamps -t" kind="task" ;;
        validate) flags="" kind="file" ;;
        convert) flags="" kind="file" ;;
        help) flags="" kind="command" ;;
    esac
    if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "$flags --socket --help" -- "$cur"))
        return
    fi
    ((operands > 0)) && return
    case "$kind" in
        file) COMPREPLY=($(compgen -f -- "$cur")) ;;
        task) COMPREPLY=($(compgen -W "$(_deckhand_tasks)" -- "$cur")) ;;
        command) COMPREPLY=($(compgen -W "run submit stop ps top inspect events logs validate convert help" -- "$cur")) ;;
    esac
}
complete -F _deckhand deckhand
