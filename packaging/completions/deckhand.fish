# fish completion for deckhand, generated from deckhand's command table (src/cli/command_table.rs).

function __deckhand_tasks
    deckhand ps --all 2>/dev/null | awk 'NR > 1 { print $1 }'
end

complete -c deckhand -f
complete -c deckhand -l socket -r -F -d 'the agent\'s API socket'
complete -c deckhand -l help -s h -d 'show help'
complete -c deckhand -l version -s V -d 'print the version'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a run -d 'run the agent in the foreground'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a submit -d 'start the task in FILE (- = stdin); prints its id'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a stop -d 'stop a task'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a ps -d 'list the tasks not stopped'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a top -d 'a live view of the tasks and what they use'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a inspect -d 'show a task as JSON (ECS task metadata v4 shape)'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a events -d 'print state changes, one JSON object per line'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a logs -d 'print a task\'s container output'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a validate -d 'check a task definition offline (- = stdin)'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a convert -d 'print the ECS task definition a Compose file becomes'
complete -c deckhand -n 'not __fish_seen_subcommand_from run submit stop ps top inspect events logs validate convert help' -a help -d 'show help for a command'
complete -c deckhand -n '__fish_seen_subcommand_from run' -l config -r -F -d 'the configuration file'
complete -c deckhand -n '__fish_seen_subcommand_from submit' -F
complete -c deckhand -n '__fish_seen_subcommand_from stop' -l wait -d 'return once the task is STOPPED'
complete -c deckhand -n '__fish_seen_subcommand_from stop' -a '(__deckhand_tasks)'
complete -c deckhand -n '__fish_seen_subcommand_from ps' -l all -s a -d 'stopped tasks too'
complete -c deckhand -n '__fish_seen_subcommand_from ps' -l json -d 'the inspect objects as a JSON array'
complete -c deckhand -n '__fish_seen_subcommand_from top' -l once -d 'print one frame and exit'
complete -c deckhand -n '__fish_seen_subcommand_from top' -l json -d 'print one reading as JSON and exit'
complete -c deckhand -n '__fish_seen_subcommand_from inspect' -a '(__deckhand_tasks)'
complete -c deckhand -n '__fish_seen_subcommand_from events' -l follow -s f -d 'keep printing new events'
complete -c deckhand -n '__fish_seen_subcommand_from events' -l since -r -d 'only events after number N'
complete -c deckhand -n '__fish_seen_subcommand_from logs' -l follow -s f -d 'keep printing new lines'
complete -c deckhand -n '__fish_seen_subcommand_from logs' -l tail -s n -r -d 'only the last N lines of each container'
complete -c deckhand -n '__fish_seen_subcommand_from logs' -l since -r -d 'only lines since a duration, time or Unix seconds'
complete -c deckhand -n '__fish_seen_subcommand_from logs' -l timestamps -s t -d 'put Docker\'s time before each line'
complete -c deckhand -n '__fish_seen_subcommand_from logs' -a '(__deckhand_tasks)'
complete -c deckhand -n '__fish_seen_subcommand_from validate' -F
complete -c deckhand -n '__fish_seen_subcommand_from convert' -F
complete -c deckhand -n '__fish_seen_subcommand_from help' -a 'run submit stop ps top inspect events logs validate convert help'
