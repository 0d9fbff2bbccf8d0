//! Fuzz entry point for the host's GPU discovery: `nvidia-smi -L`'s output, the driver's
//! `/proc/driver/nvidia/gpus/*/information` files and the `DECKHAND_GPU_IDS` list.

use crate::host::gpus::{is_gpu_id, parse_id_list, parse_nvidia_smi_list, parse_proc_information};

/// The bytes as each of the three: no panic; every id read is an id, each at most once; and a
/// list of ids written back with commas reads back as the same list.
pub fn gpu_list(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let listed = parse_nvidia_smi_list(&text);
    for (index, id) in listed.iter().enumerate() {
        assert!(is_gpu_id(id), "{id:?} from {text:?}");
        assert!(!listed[..index].contains(id), "{id:?} twice from {text:?}");
    }
    let written = listed.join(",");
    assert_eq!(parse_id_list(&written).as_ref(), Ok(&listed), "{written:?}");
    if let Some(id) = parse_proc_information(&text) {
        assert!(is_gpu_id(&id), "{id:?} from {text:?}");
    }
    if let Ok(ids) = parse_id_list(&text) {
        for id in &ids {
            assert!(is_gpu_id(id), "{id:?} from {text:?}");
        }
        assert_eq!(parse_id_list(&ids.join(",")), Ok(ids), "{text:?}");
    }
}
