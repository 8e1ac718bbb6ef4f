pub mod sourceview;
