//! `SaveExternalOptions::sync` is honoured by both files of a save with external data: the
//! weight files and the `.onnx` are synced before their rename, or neither is. (The test has the
//! process to itself: the sync counter is process-wide.)

use onnx_light::proto::ModelProto;
use onnx_light::{LoadOptions, SaveExternalOptions};

#[test]
fn sync_false_syncs_neither_file_and_true_syncs_both() {
    let _alone = crate::alone();
    let dir = std::env::temp_dir().join(format!("onnx_light_save_sync_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut m = ModelProto::new();
    m.set_ir_version(10);
    let t = m.mutable_graph().add_initializer();
    t.set_name("w");
    t.set_data_type(2);
    t.add_dims(4096);
    t.set_raw_data(vec![7u8; 4096]);
    for (sync, expected) in [(false, 0), (true, 2)] {
        let opts = SaveExternalOptions {
            sync,
            ..Default::default()
        };
        let before = onnx_light::codec::file_sync_count();
        let path = dir.join(format!("m{sync}.onnx"));
        let report = onnx_light::save_model_with_external_data(&m, &path, &opts).unwrap();
        assert_eq!(report.files.len(), 1);
        assert_eq!(
            onnx_light::codec::file_sync_count() - before,
            expected,
            "sync {sync}"
        );
        let back = onnx_light::load_model(&path, &LoadOptions::default()).unwrap();
        assert_eq!(
            back.graph().initializer()[0]
                .raw_data_opt()
                .as_ref()
                .unwrap()
                .as_slice(),
            &[7u8; 4096]
        );
    }
    // The plain save syncs its one file.
    let before = onnx_light::codec::file_sync_count();
    onnx_light::save_model(&m, dir.join("plain.onnx"), &Default::default()).unwrap();
    assert_eq!(onnx_light::codec::file_sync_count() - before, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
